// A strict window zone's memory of Redis's rejections: it rejects what
// Redis would, with Redis's answer, and only that.
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
    Decision m = remember_denial(rejection(2, 5'000, 9'000), 3, 1'000'000);
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
    Decision      m = remember_denial(rejection(2, 5'000, 9'000), 3, 1'000'000);
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
    EXPECT_FALSE(remember_denial(rejection(10, -1, 0), 11, 1'000'000).store);
}

TEST(Denial, LargeValuesKeepTheirHalves)
{
    const int64_t cost = 1'000'000'000;
    const int64_t remaining = (int64_t{1} << 31) - 1;
    Decision      m = remember_denial(
             rejection(remaining, 86'400'000'000, 86'400'000'000), cost, 1);
    Decision d = recall_denial(&m.state, m.expire_at_us, remaining, 2, cost);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, remaining);
    EXPECT_FALSE(recall_denial(&m.state, m.expire_at_us, remaining, 2, cost - 1)
                     .result.limited);
}
