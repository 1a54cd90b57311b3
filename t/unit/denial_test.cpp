// SPDX-License-Identifier: BSD-2-Clause
// A strict window zone's memory of Redis's answers: it rejects what Redis
// would, with Redis's answer, and only that.
#include "throttle/denial.hpp"

#include <gtest/gtest.h>

using namespace throttle;

namespace {

constexpr int64_t kSecond = 1'000'000;

// The plan of the requests below: 10 units a second.
constexpr DenialPlan kPlan{10, kSecond};

ThrottleResult
rejection(int64_t remaining, int64_t retry_after_us, int64_t reset_after_us)
{
    ThrottleResult r;
    r.limited = true;
    r.limit = 10;
    r.remaining = remaining;
    r.retry_after_us = retry_after_us;
    r.reset_after_us = reset_after_us;
    return r;
}

// What the memory answers a second after it was made, under `plan`.
ThrottleResult
recalled(const Decision &memory, const DenialPlan &plan, int64_t cost)
{
    return recall_denial(&memory.state, memory.expire_at_us, plan, 1'001'000,
                         cost)
        .result;
}

} // namespace

TEST(Denial, RejectsTheSameCostUntilTheRetryWithRedisAnswer)
{
    Decision m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3,
                                 1'000'000, false, kPlan);
    EXPECT_EQ(m.state.words[0], 1'005'000);
    EXPECT_EQ(m.expire_at_us, 1'009'000); // kept until the key is fresh

    Decision d = recall_denial(&m.state, m.expire_at_us, kPlan, 1'001'000, 3);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 4'000);
    EXPECT_EQ(d.result.reset_after_us, 8'000);
    EXPECT_EQ(d.result.remaining, 2);
    EXPECT_EQ(d.result.limit, 10);
    EXPECT_FALSE(d.store);

    EXPECT_TRUE(recall_denial(&m.state, m.expire_at_us, kPlan, 1'004'999, 3)
                    .result.limited);
}

TEST(Denial, AsksRedisForOtherCostsOrLater)
{
    Decision      m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3,
                                      1'000'000, false, kPlan);
    const int64_t until = m.expire_at_us;

    // a smaller cost may fit in what is left
    EXPECT_FALSE(
        recall_denial(&m.state, until, kPlan, 1'001'000, 2).result.limited);
    // a larger one waits longer than the retry remembered: Redis knows how
    // long
    EXPECT_FALSE(
        recall_denial(&m.state, until, kPlan, 1'001'000, 4).result.limited);
    // and one above the limit gets Redis's "never" (no retry time)
    EXPECT_FALSE(
        recall_denial(&m.state, until, kPlan, 1'001'000, 11).result.limited);
    // the retry time has come
    EXPECT_FALSE(
        recall_denial(&m.state, until, kPlan, 1'005'000, 3).result.limited);
    // nothing remembered
    EXPECT_FALSE(recall_denial(nullptr, 0, kPlan, 1'001'000, 3).result.limited);
}

TEST(Denial, NothingToRememberForACostThatNeverFits)
{
    EXPECT_FALSE(remember_denial(nullptr, rejection(10, -1, 0), 11, 1'000'000,
                                 false, kPlan)
                     .store);
}

TEST(Denial, LargeValuesKeepTheirPlaces)
{
    // the largest limit (a sliding_window's), cost and units used
    const int64_t    limit = (int64_t{1} << 31) - 1;
    const int64_t    cost = 1'000'000'000;
    const int64_t    remaining = cost - 1;
    const DenialPlan plan{limit, 86'400 * kSecond};
    ThrottleResult   refused =
        rejection(remaining, 86'400'000'000, 86'400'000'000);
    refused.limit = limit;

    Decision m = remember_denial(nullptr, refused, cost, 1, false, plan);
    Decision d = recall_denial(&m.state, m.expire_at_us, plan, 2, cost);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, remaining);
    EXPECT_FALSE(recall_denial(&m.state, m.expire_at_us, plan, 2, cost - 1)
                     .result.limited);
}

TEST(Denial, AnAdmissionForgetsAndARejectionReplaces)
{
    Decision m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3, 1'000,
                                 false, kPlan);

    ThrottleResult admitted;
    admitted.limit = 10;
    admitted.remaining = 1;
    Decision forget =
        remember_denial(&m.state, admitted, 1, 2'000, false, kPlan);
    EXPECT_TRUE(forget.store);
    EXPECT_EQ(forget.expire_at_us, 0); // stale at once
    // nothing remembered: nothing to forget
    EXPECT_FALSE(
        remember_denial(nullptr, admitted, 1, 2'000, false, kPlan).store);

    Decision replaced = remember_denial(&m.state, rejection(0, 7'000, 9'000), 2,
                                        2'000, false, kPlan);
    EXPECT_TRUE(replaced.store);
    EXPECT_EQ(replaced.state.words[0], 9'000);
    EXPECT_TRUE(
        recall_denial(&replaced.state, replaced.expire_at_us, kPlan, 2'500, 2)
            .result.limited);
    EXPECT_FALSE(
        recall_denial(&replaced.state, replaced.expire_at_us, kPlan, 2'500, 3)
            .result.limited);

    // a cost that never fits changes nothing in Redis: the memory holds
    EXPECT_FALSE(remember_denial(&m.state, rejection(2, -1, 9'000), 11, 2'000,
                                 false, kPlan)
                     .store);
}

TEST(Denial, WhereUnitsLeaveGraduallyOnlyCostOneIsRemembered)
{
    // the remaining units of a cost-2 rejection may grow to 1 before the
    // retry time: Redis answers each of those
    EXPECT_FALSE(remember_denial(nullptr, rejection(0, 5'000, 9'000), 2, 1'000,
                                 true, kPlan)
                     .store);
    // a cost-1 rejection leaves 0 until then
    EXPECT_TRUE(remember_denial(nullptr, rejection(0, 5'000, 9'000), 1, 1'000,
                                true, kPlan)
                    .store);
}

// docs/plans.md: a rejection remembered under one plan rejects a request of
// another only where Redis would reject it too.
TEST(Denial, AnotherPlanIsRejectedOnlyWhereRedisWouldReject)
{
    // 8 of 10 used (remaining 2): a cost of 3 was refused until 1'005'000
    Decision m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3,
                                 1'000'000, false, kPlan);

    // an upgrade to 11 in the same window: 8 + 3 fit, Redis decides
    EXPECT_FALSE(recalled(m, {11, kSecond}, 3).limited);
    // a downgrade to 9: still refused, with what is left of 9
    const ThrottleResult d = recalled(m, {9, kSecond}, 3);
    EXPECT_TRUE(d.limited);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_EQ(d.limit, 9);
    // down to 5, fewer than the 8 used: remaining 0, not negative
    EXPECT_EQ(recalled(m, {5, kSecond}, 3).remaining, 0);
    // another window (10 a minute) starts and ends elsewhere: Redis decides
    EXPECT_FALSE(recalled(m, {10, 60 * kSecond}, 3).limited);
}

TEST(Denial, AGradualRejectionHoldsForNoLargerLimit)
{
    // a sliding window refused cost 1 with none left: 10 of 10 used
    Decision m = remember_denial(nullptr, rejection(0, 5'000, 9'000), 1,
                                 1'000'000, true, kPlan);
    EXPECT_TRUE(recalled(m, {8, kSecond}, 1).limited);
    EXPECT_FALSE(recalled(m, {11, kSecond}, 1).limited);
}

// A zone kept over a reload that loaded this module may hold a memory of
// the layout before (pack_counts(cost, remaining)): it is no memory, and
// Redis decides.
TEST(Denial, AMemoryOfTheLayoutBeforeIsNone)
{
    KeyState before;
    before.words[0] = 1'005'000;
    for (int64_t cost : {1, 3}) {
        for (int64_t remaining : {0, 2, 7}) {
            before.words[1] = pack_counts(cost, remaining);
            for (int64_t asked = 0; asked <= 12; asked++) {
                EXPECT_FALSE(recall_denial(&before, 1'009'000, {10, kSecond},
                                           1'001'000, asked)
                                 .result.limited)
                    << cost << " " << remaining << " " << asked;
            }
        }
    }
}
