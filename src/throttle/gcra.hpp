// The generic cell rate algorithm (the "funnel"), with the exact semantics
// of redis-cell's CL.THROTTLE: see DESIGN.md for the reference vectors.
#pragma once

#include "throttle/result.hpp"

#include <cstdint>
#include <optional>

namespace throttle {

struct GcraParams {
    int64_t emission_interval_us; // T = period / count
    int64_t tolerance_us;         // DVT = T * (burst + 1)
    int64_t limit;                // burst + 1
};

struct GcraOutcome {
    ThrottleResult result;
    // The theoretical arrival time to store; meaningful only when the
    // request passed (a rejection stores nothing).
    int64_t new_tat_us = 0;
};

// Decides one request of `cost` units at `now_us` against the stored
// theoretical arrival time `tat_us` (nullopt for a key never seen or
// expired). cost must be >= 0.
GcraOutcome gcra_decide(const GcraParams &params, std::optional<int64_t> tat_us,
                        int64_t now_us, int64_t cost) noexcept;

} // namespace throttle
