// What every algorithm reads and writes: a key's state as the shared-memory
// zone stores it, and the outcome of deciding one request against it.
#pragma once

#include "throttle/result.hpp"

#include <cstdint>

namespace throttle {

// Per-key state: two words whose meaning belongs to the algorithm.
//   gcra            words[0] = TAT, us
//   fixed_window    words[0] = start of the window counted (a multiple of
//                   the window), words[1] = units admitted in it
//   sliding_window  words[0] = start of the current window, words[1] =
//                   units admitted in the previous window << 32 | units
//                   admitted in the current one (limits stay below 2^31)
//   sliding_log     words[0] = ring index of the oldest entry, words[1] =
//                   entries; the timestamps live in a ring of limit slots
//                   beside the state (see sliding_log.hpp)
struct KeyState {
    int64_t words[2] = {0, 0};
};

struct Decision {
    ThrottleResult result;
    // Whether `state` must be written back; false leaves the key untouched.
    bool     store = false;
    KeyState state{};
    // When the stored state becomes equal to a fresh key's and may go.
    int64_t expire_at_us = 0;
};

} // namespace throttle
