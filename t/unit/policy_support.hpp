// SPDX-License-Identifier: BSD-2-Clause
// What the algorithm tests share: policies made by algorithm name, and a
// key held the way a zone holds it, through the same Policy calls the nginx
// glue makes.
#pragma once

#include "throttle/plans.hpp"
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

// A concurrent= zone of `limit` places.
inline Policy
concurrent_policy(int64_t limit, int64_t lease_us = kDefaultLeaseUs,
                  Mode mode = Mode::local)
{
    static Message why;
    ZoneParams     params;
    params.concurrent = limit;
    params.lease_us = lease_us;
    params.mode = mode;
    auto p = make_policy(params, why);
    EXPECT_TRUE(p) << p.error;
    return p ? *p.value : Policy{};
}

// A zone whose rate= and burst= are variables (docs/plans.md): its
// template, of which each request makes its own policy (plan_of()).
inline Policy
plans_zone(std::string_view algorithm, Mode mode = Mode::local,
           std::optional<int64_t> log_max = std::nullopt)
{
    static Message why;
    ZoneParams     params;
    params.algorithm = &algorithm_named(algorithm);
    params.rate_varies = true;
    params.burst_varies = true;
    params.mode = mode;
    params.log_max = log_max;
    params.sync_interval_us = mode == Mode::async ? 100'000 : 0;
    auto p = make_policy(params, why);
    EXPECT_TRUE(p) << p.error;
    return p ? *p.value : Policy{};
}

// A request's policy in such a zone, for the texts its variables gave.
inline Policy
plan_of(const Policy &zone, std::string_view rate, std::string_view burst)
{
    Message why;
    auto    p = make_plan(zone, {rate, burst}, why);
    EXPECT_TRUE(p) << p.error;
    return p ? *p.value : zone;
}

// Every algorithm, by name.
inline const char *const kEveryAlgorithm[] = {"gcra", "fixed_window",
                                              "sliding_window", "sliding_log"};

// Every algorithm with a limit of 5: GCRA at 10r/s with burst=4 (a unit
// drains in 100 ms), the windows at 5r/s.
inline Policy
limit_of_5(std::string_view algorithm, Mode mode = Mode::local)
{
    constexpr int64_t second_us = 1'000'000;
    return algorithm == "gcra"
        ? make_test_policy(algorithm, 10, second_us, 4, mode)
        : make_test_policy(algorithm, 5, second_us, 0, mode);
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
// if the request passed, commits: a zone with one throttle line. settle()
// settles a request it charged, once the request has ended.
struct StoredSlot {
    bool                 held = false;
    StoredKey            key;
    std::vector<int64_t> log;

    // What the zone decides, committing nothing.
    Decision peek(const Policy &p, int64_t now, int64_t cost) const
    {
        return p.decide(held ? &key : nullptr, held ? log.data() : nullptr, now,
                        cost);
    }

    Decision hit(const Policy &p, int64_t now, int64_t cost)
    {
        Decision d = peek(p, now, cost);
        if (!d.result.limited && d.store) {
            hold(p, now);
            p.commit(d, now, cost, key, log.data());
        }
        return d;
    }

    // A key the zone does not hold is made for a charge only.
    void settle(const Policy &p, int64_t reserved_units, int64_t settled_units,
                int64_t reserved_at_us, int64_t now)
    {
        if (!held && settled_units <= reserved_units) {
            return;
        }
        hold(p, now);
        p.settle(key, log.data(), reserved_units, settled_units, reserved_at_us,
                 now);
    }

  private:
    void hold(const Policy &p, int64_t now)
    {
        if (!held) {
            // a new node: zeroed, and for a sliding_log, slots whose
            // leftovers would count if they were read
            held = true;
            key = StoredKey{};
            log.assign(static_cast<size_t>(p.log_slots), now);
        }
    }
};

// Whether two slots hold the same, to the word.
inline bool
same_slot(const StoredSlot &a, const StoredSlot &b)
{
    const StoredKey &x = a.key;
    const StoredKey &y = b.key;
    return a.held == b.held && x.expire_at_us == y.expire_at_us
        && x.pending.units == y.pending.units
        && x.pending.since == y.pending.since
        && x.state.words[0] == y.state.words[0]
        && x.state.words[1] == y.state.words[1] && a.log == b.log;
}

// The key's state words and expiry, as the zone holds them.
inline void
expect_key(const StoredSlot &slot, int64_t word0, int64_t word1,
           int64_t expire_at_us)
{
    EXPECT_TRUE(slot.held);
    EXPECT_EQ(slot.key.state.words[0], word0);
    EXPECT_EQ(slot.key.state.words[1], word1);
    EXPECT_EQ(slot.key.expire_at_us, expire_at_us);
}

} // namespace throttle::testing_support
