// SPDX-License-Identifier: BSD-2-Clause
// What every algorithm reads and writes: a key's state as the shared-memory
// zone stores it, and the outcome of deciding one request against it.
#pragma once

#include "throttle/result.hpp"

#include <cstdint>

namespace throttle {

// Per-key state: two words whose meaning belongs to the algorithm (see each
// algorithm's header). A strict zone keeps its memory of Redis's denials
// in them instead.
struct KeyState {
    int64_t words[2] = {0, 0};
};

struct Decision {
    ThrottleResult result;
    // Whether commit() must write the request into the key; false leaves
    // the key untouched.
    bool     store = false;
    KeyState state{};
    // When the stored state becomes equal to a fresh key's and may go.
    int64_t expire_at_us = 0;
};

// Async zones: the units a node charged to a key since its last sync,
// kept per algorithm (see its Syncing): GCRA's count and when the first of
// them was charged; the window counters' counts of a window and of the one
// before, packed, and the window's start.
struct PendingUnits {
    int64_t units = 0;
    int64_t since = 0;
};

// What a zone holds of a key in its shared memory, whatever the algorithm
// and mode (plain words: no constructor runs there). Times are of the
// zone's clock.
struct StoredKey {
    int64_t      expire_at_us = 0; // stale from then on
    PendingUnits pending;          // async: not yet synced; strict:
                                   // .since, see Policy::forget_answers()
    KeyState state;
};

// Two counts in one word, `high << 32 | low`: each must be in (-2^31,
// 2^31). Every limit and cost is in [0, 2^31) (a window's counters; a
// remembered denial's cost and remaining units); only an async key's
// pending units can be negative, when a settle gave units back.
constexpr int64_t
pack_counts(int64_t high, int64_t low) noexcept
{
    return static_cast<int64_t>(
        static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32
        | static_cast<uint32_t>(low));
}

constexpr int64_t
high_count(int64_t packed) noexcept
{
    return static_cast<int32_t>(
        static_cast<uint32_t>(static_cast<uint64_t>(packed) >> 32));
}

constexpr int64_t
low_count(int64_t packed) noexcept
{
    return static_cast<int32_t>(static_cast<uint32_t>(packed));
}

static_assert(high_count(pack_counts(-3, 5)) == -3
                  && low_count(pack_counts(-3, 5)) == 5
                  && low_count(pack_counts(7, -9)) == -9
                  && high_count(pack_counts(0x7fff'ffff, 1)) == 0x7fff'ffff,
              "pack_counts() keeps each count and its sign");

} // namespace throttle
