// A zone's policy: which algorithm, at what rate, with how much burst; and
// the one entry point that decides a request against a key's state.
#pragma once

#include "throttle/gcra.hpp"
#include "throttle/parse.hpp"
#include "throttle/result.hpp"

#include <cstdint>
#include <string_view>

namespace throttle {

enum class Algorithm { gcra };

// "gcra"; names of algorithms not built yet are refused with a reason.
Parsed<Algorithm> parse_algorithm(std::string_view name) noexcept;
std::string_view  algorithm_name(Algorithm algorithm) noexcept;

// The largest burst= accepted; beyond it the tolerance would not fit the
// microsecond arithmetic for the slowest rates.
constexpr int64_t kMaxBurst = 1'000'000'000;

// The longest time a zone may take to refill (T * (burst + 1)): 2^51 us.
constexpr int64_t kMaxToleranceUs = int64_t{1} << 51;

// The largest cost= accepted.
constexpr int64_t kMaxCost = 1'000'000'000;

struct Policy {
    Algorithm  algorithm = Algorithm::gcra;
    Rate       rate{};
    int64_t    burst = 0;
    GcraParams gcra{};

    int64_t limit() const noexcept { return gcra.limit; }
    // The time a drained zone takes to refill: the draft's "w" parameter.
    int64_t window_us() const noexcept { return gcra.tolerance_us; }
};

Parsed<Policy> make_policy(Algorithm algorithm, Rate rate,
                           int64_t burst) noexcept;

// Per-key state as the shared-memory zone stores it: two words whose
// meaning belongs to the algorithm (GCRA keeps its TAT in words[0]).
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

// `current` is null for a key the zone does not hold (or holds expired).
Decision decide(const Policy &policy, const KeyState *current, int64_t now_us,
                int64_t cost) noexcept;

} // namespace throttle
