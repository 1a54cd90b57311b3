// SPDX-License-Identifier: BSD-2-Clause
// What the tests of throttle::RequestDecision share: a local and a strict
// zone's policy, the answers a zone gives, and a request whose checks the
// test decides, playing the glue's part.
#pragma once

#include "policy_support.hpp"
#include "throttle/request.hpp"

#include <initializer_list>
#include <vector>

namespace throttle {
namespace request_support {

using namespace testing_support;

constexpr int64_t kSecond = 1'000'000;

inline const Policy &
local_policy()
{
    static const Policy p = make_test_policy("gcra", 10, kSecond, 10);
    return p;
}

inline const Policy &
strict_policy()
{
    static const Policy p =
        make_test_policy("gcra", 10, kSecond, 10, Mode::strict);
    return p;
}

inline ThrottleResult
passes(int64_t remaining)
{
    return ThrottleResult{false, 11, remaining, 100'000, -1};
}

// Admitted, the key full until `reset_after_us` from now: at 10r/s a line
// of delay=2 holds a request of cost 1 for what is beyond 300 ms.
inline ThrottleResult
passes_full_for(int64_t reset_after_us)
{
    return ThrottleResult{false, 11, 1, reset_after_us, -1};
}

inline ThrottleResult
refuses(int64_t retry_after_us)
{
    return ThrottleResult{true, 11, 0, 1'000'000, retry_after_us};
}

// A request's checks, and the decision over them; the test plays the
// glue's part.
struct Request {
    std::vector<ZoneCheck> checks;
    RequestDecision        decision;

    explicit Request(std::initializer_list<const Policy *> policies,
                     RequestRules                          rules = {})
    {
        for (const Policy *p : policies) {
            ZoneCheck c;
            c.policy = p;
            c.cost = 1;
            checks.push_back(c);
        }
        decision.begin(rules, checks.data(), checks.size());
    }

    // The zones of this stage decide: `results[i]` for check i (ignored
    // when it takes no part); `room`: whether every zone has room for the
    // charge.
    void pass(std::initializer_list<ThrottleResult> results, bool room = true)
    {
        size_t i = 0;
        for (const ThrottleResult &r : results) {
            if (decision.takes_part(i)) {
                checks[i].decision.result = r;
            }
            i++;
        }
        decision.end_pass(room);
    }

    Status status() const { return decision.outcome().status; }
    int    binding() const { return decision.outcome().binding; }
};

} // namespace request_support
} // namespace throttle
