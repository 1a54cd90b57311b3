// A zone's policy: which algorithm, at what rate, with how much burst; and
// the one entry point that decides a request against a key's state.
#pragma once

#include "throttle/decision.hpp"
#include "throttle/gcra.hpp"
#include "throttle/parse.hpp"
#include "throttle/result.hpp"
#include "throttle/sliding_log.hpp"
#include "throttle/windows.hpp"

#include <cstdint>
#include <string_view>

namespace throttle {

enum class Algorithm { gcra, fixed_window, sliding_window, sliding_log };

// "gcra", "fixed_window", "sliding_window" or "sliding_log".
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
    Algorithm    algorithm = Algorithm::gcra;
    Rate         rate{};
    int64_t      burst = 0;
    GcraParams   gcra{};   // gcra
    WindowParams window{}; // the other algorithms

    // Units a fresh key admits at once: burst + 1 (gcra), or per window
    // (the rate's count + burst).
    int64_t limit() const noexcept
    {
        return algorithm == Algorithm::gcra ? gcra.limit : window.limit;
    }
    // The draft's "w" parameter: the time a drained funnel takes to
    // refill (gcra), or the window.
    int64_t window_us() const noexcept
    {
        return algorithm == Algorithm::gcra ? gcra.tolerance_us
                                            : window.window_us;
    }
    // Windows start on whole seconds, minutes, ... of the wall clock, as
    // Redis's TIME has them; GCRA needs only a clock that never goes back.
    bool wall_clock() const noexcept { return algorithm != Algorithm::gcra; }
    // Timestamp slots a sliding_log key keeps (0 for the others).
    int64_t log_slots() const noexcept
    {
        return algorithm == Algorithm::sliding_log ? window.limit : 0;
    }
};

// `log_max` caps the limit of a sliding_log zone (kDefaultLogMax unless the
// zone says otherwise); errors name what is out of range.
Parsed<Policy> make_policy(Algorithm algorithm, Rate rate, int64_t burst,
                           int64_t log_max = kDefaultLogMax) noexcept;

// `current` is null for a key the zone does not hold (or holds expired);
// `log` is the key's ring of policy.log_slots() timestamps (sliding_log
// only; null with a null `current`).
Decision decide(const Policy &policy, const KeyState *current, int64_t now_us,
                int64_t cost, const int64_t *log = nullptr) noexcept;

} // namespace throttle
