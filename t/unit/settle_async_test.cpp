// SPDX-License-Identifier: BSD-2-Clause
// settle= in async zones: the key settles as a local one does
// (settle_random_test.cpp walks that), and what the settle changed joins
// the key's unsent units (Syncing::settle()), given back units as
// negative counts, for the sync to take to Redis; a node's view after a
// sync keeps them (synced_tat(), synced_window_state()).
#include "throttle/gcra.hpp"
#include "throttle/policy.hpp"
#include "throttle/window_sync.hpp"
#include "throttle/windows.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kMs = 1000;

// limit_of_5 (GCRA: T = 100 ms, tolerance 400 ms; windows of 1 s), async
Policy
async_limit_of_5(std::string_view algorithm)
{
    return limit_of_5(algorithm, Mode::async);
}

TEST(SettleAsyncGcra, ARefundAndAChargeJoinTheUnitsUnsent)
{
    const Policy p = async_limit_of_5("gcra");
    StoredSlot   slot;

    ASSERT_FALSE(slot.hit(p, kEpoch, 4).result.limited);
    EXPECT_EQ(slot.key.pending.units, 4);
    EXPECT_EQ(slot.key.pending.since, kEpoch);

    // used 1 of 4: 3 back, here and for Redis
    slot.settle(p, 4, 1, kEpoch, kEpoch + 10 * kMs);
    EXPECT_EQ(slot.key.state.words[0], kEpoch + 100 * kMs);
    EXPECT_EQ(slot.key.pending.units, 1);
    EXPECT_EQ(p.pending_total(slot.key.pending), 1);

    // another used 3 more than it reserved: a debt, sent too
    slot.settle(p, 0, 3, kEpoch, kEpoch + 20 * kMs);
    EXPECT_EQ(slot.key.state.words[0], kEpoch + 400 * kMs);
    EXPECT_EQ(slot.key.pending.units, 4);
    EXPECT_EQ(slot.key.pending.since, kEpoch);
}

TEST(SettleAsyncGcra, ARefundAfterASyncSendsNegativeUnits)
{
    const Policy p = async_limit_of_5("gcra");
    StoredSlot   slot;
    ASSERT_FALSE(slot.hit(p, kEpoch, 5).result.limited);
    slot.key.pending = PendingUnits{}; // a sync took them

    slot.settle(p, 5, 2, kEpoch, kEpoch + 50 * kMs);
    EXPECT_EQ(slot.key.state.words[0], kEpoch + 200 * kMs);
    EXPECT_EQ(slot.key.pending.units, -3);
    EXPECT_EQ(slot.key.pending.since, kEpoch + 50 * kMs);
    // a refund is as much to send as a charge
    EXPECT_EQ(p.pending_total(slot.key.pending), 3);

    int64_t args[2];
    p.sync_key_args(slot.key.pending, kEpoch + 60 * kMs, args);
    EXPECT_EQ(args[0], -3);

    // Redis's TAT, 140 ms ahead when it ran the batch sent at +60 ms, with
    // 3 units given back since: the node's view is 300 ms earlier
    EXPECT_EQ(synced_tat(kEpoch + 60 * kMs, 140 * kMs, 100 * kMs, -3),
              kEpoch - 100 * kMs);
}

TEST(SettleAsyncGcra, ARefundSendsOnlyTheWholeUnitsItMoved)
{
    const Policy p = async_limit_of_5("gcra");
    StoredSlot   slot;
    ASSERT_FALSE(slot.hit(p, kEpoch, 2).result.limited);
    slot.key.pending = PendingUnits{};

    // 250 ms later 1.5 units have drained of 2 (TAT +200 ms): giving back
    // 2 moves the TAT to now, half a unit: nothing whole to send
    slot.settle(p, 2, 0, kEpoch, kEpoch + 150 * kMs);
    EXPECT_EQ(slot.key.state.words[0], kEpoch + 150 * kMs);
    EXPECT_EQ(slot.key.pending.units, 0);
}

TEST(SettleAsyncGcra, ARefundToADrainedKeySendsNothing)
{
    const Policy p = async_limit_of_5("gcra");
    StoredSlot   slot;
    ASSERT_FALSE(slot.hit(p, kEpoch, 2).result.limited);
    slot.key.pending = PendingUnits{};

    slot.settle(p, 2, 0, kEpoch, kEpoch + kSecond);
    EXPECT_EQ(slot.key.pending.units, 0);
}

TEST(SettleAsyncWindows, AFixedWindowRefundIsANegativeCountOfItsWindow)
{
    const Policy  p = async_limit_of_5("fixed_window");
    const int64_t start = kEpoch; // a window start: kEpoch is whole seconds
    StoredSlot    slot;

    ASSERT_FALSE(slot.hit(p, start + 100 * kMs, 4).result.limited);
    slot.key.pending = PendingUnits{}; // synced

    slot.settle(p, 4, 1, start + 100 * kMs, start + 300 * kMs);
    EXPECT_EQ(low_count(slot.key.state.words[1]), 1);
    EXPECT_EQ(low_count(slot.key.pending.units), -3);
    EXPECT_EQ(high_count(slot.key.pending.units), 0);
    EXPECT_EQ(slot.key.pending.since, start);
    EXPECT_EQ(p.pending_total(slot.key.pending), 3);

    int64_t args[3];
    p.sync_key_args(slot.key.pending, start + 400 * kMs, args);
    EXPECT_EQ(args[0], -3);
    EXPECT_EQ(args[1], 0);
    EXPECT_EQ(args[2], 400 * kMs);

    // a reservation of the window before weighs nothing: nothing to send
    slot.key.pending = PendingUnits{};
    slot.settle(p, 1, 0, start + 300 * kMs, start + kSecond + 10 * kMs);
    EXPECT_EQ(slot.key.pending.units, 0);
}

TEST(SettleAsyncWindows, ASlidingWindowRefundOfThePreviousWindow)
{
    const Policy  p = async_limit_of_5("sliding_window");
    const int64_t start = kEpoch;
    StoredSlot    slot;

    ASSERT_FALSE(slot.hit(p, start + 900 * kMs, 4).result.limited);
    slot.key.pending = PendingUnits{};

    // the request ends in the next window: its units weigh there as the
    // previous window's, and 3 of them come back from that count
    slot.settle(p, 4, 1, start + 900 * kMs, start + kSecond + 100 * kMs);
    EXPECT_EQ(high_count(slot.key.state.words[1]), 1);
    EXPECT_EQ(high_count(slot.key.pending.units), -3);
    EXPECT_EQ(low_count(slot.key.pending.units), 0);
    EXPECT_EQ(slot.key.pending.since, start + kSecond);

    // and a charge in the same window adds to the current count
    slot.settle(p, 0, 2, start + kSecond, start + kSecond + 200 * kMs);
    EXPECT_EQ(high_count(slot.key.pending.units), -3);
    EXPECT_EQ(low_count(slot.key.pending.units), 2);
}

TEST(SettleAsyncWindows, TheViewAfterASyncKeepsARefundNotBelowZero)
{
    const int64_t w = kSecond;
    KeyState      state;
    int64_t       expire_at_us = 0;
    // Redis counted 2 in the window (the sync left 100 ms into it); the
    // node gave back 3 since
    const int64_t counts[1] = {2};
    ASSERT_TRUE(synced_window_state(
        PreviousWindow::ignored, w, kEpoch + 100 * kMs, 100 * kMs, counts,
        {pack_counts(0, -3), kEpoch}, kEpoch + 200 * kMs, state, expire_at_us));
    EXPECT_EQ(state.words[1], 0);

    // a count no script of ours gives is held to what a window counts
    const int64_t huge[1] = {int64_t{10} << 32};
    ASSERT_TRUE(synced_window_state(
        PreviousWindow::ignored, w, kEpoch + 100 * kMs, 100 * kMs, huge,
        {pack_counts(0, -3), kEpoch}, kEpoch + 200 * kMs, state, expire_at_us));
    EXPECT_EQ(low_count(state.words[1]), kMaxWindowCount);

    const int64_t both[2] = {4, 1};
    ASSERT_TRUE(synced_window_state(
        PreviousWindow::weighs, w, kEpoch + 100 * kMs, 100 * kMs, both,
        {pack_counts(-3, 2), kEpoch}, kEpoch + 200 * kMs, state, expire_at_us));
    EXPECT_EQ(high_count(state.words[1]), 1);
    EXPECT_EQ(low_count(state.words[1]), 3);
}

TEST(SettleAsyncWindows, NegativeUnitsMergeWithTheOthers)
{
    const int64_t w = kSecond;
    // given back 3 of the window at kEpoch; then 2 charged in the next
    const PendingUnits merged =
        merge_window_units(PreviousWindow::weighs, w,
                           {pack_counts(0, -3), kEpoch}, {2, kEpoch + w});
    EXPECT_EQ(merged.since, kEpoch + w);
    EXPECT_EQ(high_count(merged.units), -3);
    EXPECT_EQ(low_count(merged.units), 2);
}

} // namespace
} // namespace throttle
