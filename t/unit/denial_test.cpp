// SPDX-License-Identifier: BSD-2-Clause
// A strict window zone's memory of Redis's answers: it rejects what Redis
// would, with Redis's answer, and only that.
#include "throttle/denial.hpp"

#include <gtest/gtest.h>

using namespace throttle;

namespace {

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

} // namespace

TEST(Denial, RejectsTheSameCostUntilTheRetryWithRedisAnswer)
{
    Decision m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3,
                                 1'000'000, false);
    EXPECT_EQ(m.state.words[0], 1'005'000);
    EXPECT_EQ(m.expire_at_us, 1'009'000); // kept until the key is fresh

    Decision d = recall_denial(&m.state, m.expire_at_us, 10, 1'001'000, 3);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 4'000);
    EXPECT_EQ(d.result.reset_after_us, 8'000);
    EXPECT_EQ(d.result.remaining, 2);
    EXPECT_EQ(d.result.limit, 10);
    EXPECT_FALSE(d.store);

    EXPECT_TRUE(recall_denial(&m.state, m.expire_at_us, 10, 1'004'999, 3)
                    .result.limited);
}

TEST(Denial, AsksRedisForOtherCostsOrLater)
{
    Decision      m = remember_denial(nullptr, rejection(2, 5'000, 9'000), 3,
                                      1'000'000, false);
    const int64_t until = m.expire_at_us;

    // a smaller cost may fit in what is left
    EXPECT_FALSE(
        recall_denial(&m.state, until, 10, 1'001'000, 2).result.limited);
    // a larger one waits longer than the retry remembered: Redis knows how
    // long
    EXPECT_FALSE(
        recall_denial(&m.state, until, 10, 1'001'000, 4).result.limited);
    // and one above the limit gets Redis's "never" (no retry time)
    EXPECT_FALSE(
        recall_denial(&m.state, until, 10, 1'001'000, 11).result.limited);
    // the retry time has come
    EXPECT_FALSE(
        recall_denial(&m.state, until, 10, 1'005'000, 3).result.limited);
    // nothing remembered
    EXPECT_FALSE(recall_denial(nullptr, 0, 10, 1'001'000, 3).result.limited);
}

TEST(Denial, NothingToRememberForACostThatNeverFits)
{
    EXPECT_FALSE(
        remember_denial(nullptr, rejection(10, -1, 0), 11, 1'000'000, false)
            .store);
}

TEST(Denial, LargeValuesKeepTheirHalves)
{
    const int64_t cost = 1'000'000'000;
    const int64_t remaining = (int64_t{1} << 31) - 1;
    Decision      m = remember_denial(
             nullptr, rejection(remaining, 86'400'000'000, 86'400'000'000), cost, 1,
             false);
    Decision d = recall_denial(&m.state, m.expire_at_us, remaining, 2, cost);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, remaining);
    EXPECT_FALSE(recall_denial(&m.state, m.expire_at_us, remaining, 2, cost - 1)
                     .result.limited);
}

TEST(Denial, AnAdmissionForgetsAndARejectionReplaces)
{
    Decision m =
        remember_denial(nullptr, rejection(2, 5'000, 9'000), 3, 1'000, false);

    ThrottleResult admitted;
    admitted.limit = 10;
    admitted.remaining = 1;
    Decision forget = remember_denial(&m.state, admitted, 1, 2'000, false);
    EXPECT_TRUE(forget.store);
    EXPECT_EQ(forget.expire_at_us, 0); // stale at once
    // nothing remembered: nothing to forget
    EXPECT_FALSE(remember_denial(nullptr, admitted, 1, 2'000, false).store);

    Decision replaced =
        remember_denial(&m.state, rejection(0, 7'000, 9'000), 2, 2'000, false);
    EXPECT_TRUE(replaced.store);
    EXPECT_EQ(replaced.state.words[0], 9'000);
    EXPECT_EQ(high_count(replaced.state.words[1]), 2);

    // a cost that never fits changes nothing in Redis: the memory holds
    EXPECT_FALSE(
        remember_denial(&m.state, rejection(2, -1, 9'000), 11, 2'000, false)
            .store);
}

TEST(Denial, WhereUnitsLeaveGraduallyOnlyCostOneIsRemembered)
{
    // the remaining units of a cost-2 rejection may grow to 1 before the
    // retry time: Redis answers each of those
    EXPECT_FALSE(
        remember_denial(nullptr, rejection(0, 5'000, 9'000), 2, 1'000, true)
            .store);
    // a cost-1 rejection leaves 0 until then
    EXPECT_TRUE(
        remember_denial(nullptr, rejection(0, 5'000, 9'000), 1, 1'000, true)
            .store);
}
