// SPDX-License-Identifier: BSD-2-Clause
// settle= in strict zones (Policy::settle_call()): the refund and charge
// scripts against a real redis-server, beside a local zone's key settled
// by Policy::settle() on the same timeline. Every decision before and
// after a settle is the same, field by field: charges beyond the limit,
// saturating debts, refunds of part of a reservation, of more than it,
// and of one whose window has ended (the server and its clocks:
// redis_fixture.hpp).
#include "redis_fixture.hpp"

#include "policy_support.hpp"
#include "throttle/policy.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace throttle {
namespace {

using namespace testing_support;

// The same policy for the local twin.
Policy
local_twin(const Policy &strict)
{
    Policy p = strict;
    p.mode = Mode::local;
    p.log_slots = p.algorithm->name == "sliding_log" ? p.limit : 0;
    return p;
}

// A request Redis charged: when, how much, and its tokens.
struct Reservation {
    int64_t at_us = 0;
    int64_t units = 0;
    int64_t tokens[2] = {0, 0};
};

class StrictSettle : public RedisScripts {
  protected:
    // One key in Redis and its twin in a local zone, on one virtual clock
    // that starts at a window's start ahead of the real one (Redis's
    // expiries count on the real clock: every call is followed by
    // held_pttl()).
    struct Twin {
        Policy      strict;
        Policy      local;
        std::string key;
        StoredSlot  model;
        int64_t     start_us = 0;
        int64_t     window_us = 0;
    };

    static Twin twin(std::string_view algorithm, const std::string &name)
    {
        Twin t;
        t.strict = limit_of_5(algorithm, Mode::strict);
        t.local = local_twin(t.strict);
        t.key = "t:settle:" + std::string(algorithm) + ":" + name;
        t.window_us = kSecond; // gcra: where the steps fall
        t.start_us = (realtime_now_us() / t.window_us + 2) * t.window_us;
        return t;
    }

    // A request of `cost` at start + at_us, decided by Redis and by the
    // twin: the same answer. Its reservation, if it passed.
    static Reservation decide(Twin &t, int64_t at_us, int64_t cost,
                              const std::string &what)
    {
        const int64_t      now = t.start_us + at_us;
        std::vector<Reply> replies =
            pipeline({decision(t.strict, t.key, now, cost), held_pttl(t.key)});
        const ScriptReply    remote = t.strict.read_decision(replies[0].get());
        const ThrottleResult local = t.model.hit(t.local, now, cost).result;
        std::ostringstream   where;
        where << str(t.strict) << ": " << what << ", at +" << at_us
              << "us, cost " << cost;
        EXPECT_TRUE(remote.ok) << where.str() << ": " << remote.message;
        EXPECT_TRUE(same(remote.result, local))
            << where.str() << "\n  redis: " << str(remote.result)
            << "\n  C++:   " << str(local);
        EXPECT_NE(integer(replies[1].get()), -1) << where.str();

        Reservation r{now, cost, {remote.tokens[0], remote.tokens[1]}};
        return r;
    }

    // Settles `r` in Redis (Policy::settle_call()) and in the twin
    // (Policy::settle()) at start + at_us: charged `reserved` units (the
    // twin's view; Redis's is the tokens), it used `settled`. The key
    // keeps an expiry.
    static void settle(Twin &t, const Reservation &r, int64_t reserved,
                       int64_t settled, int64_t at_us)
    {
        const int64_t    now = t.start_us + at_us;
        const ScriptCall call =
            t.strict.settle_call(settled - reserved, r.tokens);
        std::vector<Reply> replies =
            pipeline({evalsha(call, t.key, now), held_pttl(t.key)});
        EXPECT_FALSE(integers(*call.script, replies[0].get()).empty())
            << call.script->name;
        EXPECT_NE(integer(replies[1].get()), -1) << call.script->name;
        t.model.settle(t.local, reserved, settled, r.at_us, now);
    }
};

TEST_F(StrictSettle, AChargeBeyondTheReservationIsCharged)
{
    for (const char *name : kEveryAlgorithm) {
        Twin              t = twin(name, "charge");
        const int64_t     u = t.window_us / 10;
        const Reservation r = decide(t, u, 2, "the reservation");

        settle(t, r, 2, 4, 2 * u);

        decide(t, 2 * u, 0, "after +2");
        decide(t, 3 * u, 2, "after +2");
        decide(t, 3 * u, 1, "after +2");
        decide(t, 4 * u, 1, "after +2");
    }
}

TEST_F(StrictSettle, ARefundGivesBackWhatStillCountsNeverBelowEmpty)
{
    // after units used `before`, a reservation of `units` used `settled`;
    // the twin reserved `reserved` (10 of 3: a refund larger than the
    // reservation, the same delta as Redis's)
    struct Case {
        int64_t before, units, reserved, settled;
    };
    for (const char *name : kEveryAlgorithm) {
        for (const Case c : {Case{1, 4, 4, 1}, Case{2, 3, 10, 0}}) {
            Twin t = twin(name, "refund:" + std::to_string(c.reserved));
            const int64_t u = t.window_us / 10;
            decide(t, 0, c.before, "before");
            const Reservation r = decide(t, u, c.units, "the reservation");

            settle(t, r, c.reserved, c.settled, 2 * u);

            decide(t, 2 * u, 0, "after the refund");
            decide(t, 2 * u, 5 - c.before, "after the refund");
            decide(t, 2 * u, 4, "after the refund");
            decide(t, 3 * u, 1, "after the refund");
        }
    }
}

TEST_F(StrictSettle, AnOverdraftRejectsUntilItHasDrained)
{
    for (const char *name : kEveryAlgorithm) {
        for (int64_t settled : {int64_t{1000}, INT64_MAX}) {
            Twin t = twin(name, "overdraft:" + std::to_string(settled));
            const int64_t     u = t.window_us / 10;
            const Reservation r = decide(t, 0, 1, "the reservation");

            settle(t, r, 1, settled, u);

            decide(t, u, 0, "overdrawn");
            decide(t, 2 * u, 1, "overdrawn");
            // a window on (gcra: 10 units on, 1000 are still ahead)
            decide(t, t.window_us + 2 * u, 1, "a window on");
            decide(t, 2 * t.window_us + 2 * u, 1, "two windows on");
        }
    }
}

TEST_F(StrictSettle, ARefundAfterTheWindowEndedGivesNothingBack)
{
    for (const char *name : kEveryAlgorithm) {
        // ended: gcra's 3 units drained, a fixed window over, a sliding
        // window's weighing nothing two windows on, a log's entries gone
        const bool        two = std::string_view(name) == "sliding_window";
        Twin              t = twin(name, "ended");
        const int64_t     u = t.window_us / 10;
        const int64_t     ended = (two ? 2 : 1) * t.window_us + u;
        const Reservation r = decide(t, u, 3, "the reservation");
        if (std::string_view(name) != "gcra") {
            // (a funnel drains as one: gcra would give back from these)
            decide(t, ended, 4, "a window on");
        }
        const StoredSlot before = t.model;

        settle(t, r, 3, 0, ended + 1);

        EXPECT_TRUE(same_slot(t.model, before)) << name;
        decide(t, ended + 1, 0, "after the refund");
        decide(t, ended + 1, 2, "after the refund");
    }
}

TEST_F(StrictSettle, ASlidingWindowRefundInTheNextWindowTakesFromThePrevious)
{
    // with and without a decision in the next window first
    for (bool between : {true, false}) {
        Twin          t = twin("sliding_window", between ? "next" : "next-0");
        const int64_t w = t.window_us;
        const Reservation r = decide(t, w / 2, 4, "the reservation");
        if (between) {
            decide(t, w + w / 10, 1, "a window on");
        }

        settle(t, r, 4, 1, w + w / 5);

        decide(t, w + w / 5, 0, "after -3");
        decide(t, w + w / 5, 3, "after -3");
        decide(t, w + w / 2, 1, "after -3");
    }
}

TEST_F(StrictSettle, ASlidingLogChargeInTheDecisionsMicrosecondAddsItsOwn)
{
    Twin              t = twin("sliding_log", "same-us");
    const Reservation r = decide(t, 0, 2, "the reservation");

    // members "<now>:5".. beside the decision's "<now>:0" and "<now>:1";
    // then the oldest give way to a second charge of the same microsecond
    settle(t, r, 2, 4, 0);
    EXPECT_EQ(integer({"ZCARD", t.key}), 4);
    settle(t, r, 0, 3, 0);
    EXPECT_EQ(integer({"ZCARD", t.key}), 5);

    decide(t, 0, 0, "after +2 +3");
    decide(t, 1, 1, "after +2 +3");
    decide(t, t.window_us, 1, "a window on");
}

} // namespace
} // namespace throttle
