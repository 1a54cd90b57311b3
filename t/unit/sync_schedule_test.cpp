// SPDX-License-Identifier: BSD-2-Clause
// Async zones' schedule: when a sync is due, its cadence, how long a claim
// and a call last, which second syncs are skipped, and what a failed call
// keeps.
#include "throttle/sync_schedule.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

TEST(SyncSchedule, FourTicksAnIntervalWithinBounds)
{
    EXPECT_EQ(sync_tick_ms(1'000'000), 250);
    EXPECT_EQ(sync_tick_ms(100'000), 25);
    EXPECT_EQ(sync_tick_ms(60'000'000), kSyncTickMaxMs); // a worker exits soon
    EXPECT_EQ(sync_tick_ms(5'000), 2);                   // not a busy loop
}

TEST(SyncSchedule, DueWithinAMillisecond)
{
    EXPECT_TRUE(sync_due(10'000, 9'000));
    EXPECT_FALSE(sync_due(10'000, 8'999));
    EXPECT_TRUE(sync_due(10'000, 50'000));
}

TEST(SyncSchedule, TheCadenceIsKeptUnlessItFellBehind)
{
    // taken a little late: the next one is still an interval after this
    // one was due
    EXPECT_EQ(next_sync_round(100'000, 50'000, 101'000), 150'000);
    // taken after a stall of more than an interval: from now
    EXPECT_EQ(next_sync_round(100'000, 50'000, 180'000), 230'000);
}

TEST(SyncSchedule, ACallWaitsAnIntervalButNotWhenExiting)
{
    EXPECT_EQ(sync_call_timeout_ms(1'000'000, 50, false), 1000);
    EXPECT_EQ(sync_call_timeout_ms(20'000, 50, false), 50);
    EXPECT_EQ(sync_call_timeout_ms(1'000'000, 50, true), 50);
}

TEST(SyncSchedule, AClaimOutlivesItsLongestCall)
{
    EXPECT_EQ(sync_claim_until(1'000'000, 100'000, 500), 1'000'000 + 600'000);
    EXPECT_EQ(sync_claim_until(1'000'000, 1'000'000, 500),
              1'000'000 + 2'000'000);
}

TEST(SyncSchedule, TheSecondSyncOfADrainedIdleKeyIsSkipped)
{
    EXPECT_TRUE(skips_last_sync(1, 0, 5'000, 5'000));
    EXPECT_FALSE(skips_last_sync(2, 0, 5'000, 6'000)); // its first: units
    EXPECT_FALSE(skips_last_sync(1, 3, 5'000, 6'000)); // charged again
    EXPECT_FALSE(skips_last_sync(1, 0, 5'001, 5'000)); // not drained
}

TEST(SyncSchedule, UnitsThatMayHaveReachedRedisAreNotSentAgain)
{
    EXPECT_EQ(failed_sync(true, false), FailedSync::units_delivered);
    EXPECT_EQ(failed_sync(true, true), FailedSync::units_kept); // an error
    EXPECT_EQ(failed_sync(false, false), FailedSync::units_kept);
}

} // namespace
} // namespace throttle
