// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/windows.hpp"

#include "throttle/policy.hpp"

namespace throttle {

namespace {

// A window counter settled by delta_units: never below 0, nor above
// kMaxWindowCount.
int64_t
settled_count(int64_t count, int64_t delta_units) noexcept
{
    if (delta_units > 0) {
        return delta_units >= kMaxWindowCount - count ? kMaxWindowCount
                                                      : count + delta_units;
    }
    return delta_units <= -count ? 0 : count + delta_units;
}

} // namespace

WindowParams
window_params(const Policy &policy) noexcept
{
    return {policy.window_us, policy.limit, policy.log_slots};
}

bool
WindowAlgorithm::configure(Policy &policy, Message &why) const noexcept
{
    const int64_t max_limit = max_limit_;

    // rate counts and bursts are both below 2^31: no overflow
    policy.window_us = policy.rate.period_us;
    policy.limit = policy.rate.count + policy.burst;
    if (policy.limit > max_limit) {
        why.format("the limit (the rate's count + burst) is above %lld, the "
                   "most a %.*s counts (rate=%s burst=%lld)",
                   static_cast<long long>(max_limit),
                   static_cast<int>(policy.algorithm->name.size()),
                   policy.algorithm->name.data(), RateText(policy.rate).text,
                   static_cast<long long>(policy.burst));
        return false;
    }
    return true;
}

void
WindowAlgorithm::settle(const Policy &policy, int64_t delta_units,
                        int64_t reserved_at_us, int64_t now_us, KeyState &state,
                        int64_t &expire_at_us, int64_t *) const noexcept
{
    settle_window_counts(previous_, window_params(policy), delta_units,
                         reserved_at_us, now_us, state, expire_at_us);
}

ScriptArgs
WindowAlgorithm::decision_args(const Policy &policy,
                               int64_t       cost) const noexcept
{
    return {{policy.window_us, policy.limit, cost, 0}, 3};
}

ScriptArgs
WindowAlgorithm::charge_args(const Policy &policy, int64_t units) const noexcept
{
    return {{policy.window_us, units, kMaxWindowCount, 0}, 3};
}

void
settle_window_counts(PreviousWindow previous, const WindowParams &params,
                     int64_t delta_units, int64_t reserved_at_us,
                     int64_t now_us, KeyState &state,
                     int64_t &expire_at_us) noexcept
{
    const bool    weighs = previous == PreviousWindow::weighs;
    const int64_t w = params.window_us;
    const int64_t start = window_start(now_us, w);
    WindowCounts  counts(&state, start, w);
    if (!weighs) {
        counts.previous = 0;
    }

    int64_t *counter = &counts.current;
    if (delta_units < 0) {
        const int64_t reserved = window_start(reserved_at_us, w);
        counter = reserved == start ? &counts.current
            : reserved == start - w ? &counts.previous
                                    : nullptr;
        if (counter == nullptr || *counter == 0) {
            return; // its units weigh nothing any more
        }
    }
    *counter = settled_count(*counter, delta_units);

    state.words[0] = start;
    state.words[1] = pack_counts(counts.previous, counts.current);
    expire_at_us = counts.current > 0 ? start + (weighs ? 2 : 1) * w
        : counts.previous > 0         ? start + w
                                      : now_us;
}

} // namespace throttle
