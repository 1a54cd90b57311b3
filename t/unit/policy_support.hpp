// SPDX-License-Identifier: BSD-2-Clause
// What the algorithm tests share: policies made by algorithm name, and a
// key held the way a zone holds it, through the same Policy calls the nginx
// glue makes.
#pragma once

#include "throttle/policy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace throttle::testing_support {

inline const Algorithm &
algorithm_named(std::string_view name)
{
    Message why;
    auto    found = find_algorithm(name, why);
    EXPECT_TRUE(found) << why.text();
    return found ? **found.value : default_algorithm();
}

inline Parsed<Policy>
try_policy(std::string_view algorithm, int64_t count, int64_t period_us,
           int64_t burst, Mode mode = Mode::local,
           std::optional<int64_t> log_max = std::nullopt)
{
    static Message why; // the tests run one at a time
    ZoneParams     params;
    params.algorithm = &algorithm_named(algorithm);
    params.rate = Rate{count, period_us};
    params.burst = burst;
    params.mode = mode;
    params.log_max = log_max;
    params.sync_interval_us = mode == Mode::async ? 100'000 : 0;
    return make_policy(params, why);
}

inline Policy
make_test_policy(std::string_view algorithm, int64_t count, int64_t period_us,
                 int64_t burst, Mode mode = Mode::local)
{
    auto p = try_policy(algorithm, count, period_us, burst, mode);
    EXPECT_TRUE(p) << p.error;
    return p ? *p.value : Policy{};
}

// The algorithm's own decision against a state, with no zone around it.
inline Decision
decide_state(const Policy &p, const KeyState *state, int64_t now, int64_t cost,
             const int64_t *log = nullptr)
{
    return p.algorithm->decide(p, state, log, now, cost);
}

// One key held the way a zone holds it: what its shared memory keeps of
// it, and the words beside it (a sliding_log's ring). hit() decides and,
// if the request passed, commits: a zone with one throttle line.
struct StoredSlot {
    bool                 held = false;
    StoredKey            key;
    std::vector<int64_t> log;

    Decision hit(const Policy &p, int64_t now, int64_t cost)
    {
        Decision d = p.decide(held ? &key : nullptr,
                              held ? log.data() : nullptr, now, cost);
        if (!d.result.limited && d.store) {
            if (!held) {
                // a new node: zeroed, and for a sliding_log, slots whose
                // leftovers would count if they were read
                held = true;
                key = StoredKey{};
                log.assign(static_cast<size_t>(p.log_slots), now);
            }
            p.commit(d, now, cost, key, log.data());
        }
        return d;
    }
};

} // namespace throttle::testing_support
