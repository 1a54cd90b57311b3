// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/windows.hpp"

#include "throttle/policy.hpp"

namespace throttle {

WindowParams
window_params(const Policy &policy) noexcept
{
    return {policy.window_us, policy.limit};
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

ScriptArgs
WindowAlgorithm::decision_args(const Policy &policy,
                               int64_t       cost) const noexcept
{
    return {{policy.window_us, policy.limit, cost, 0}, 3};
}

} // namespace throttle
