// SPDX-License-Identifier: BSD-2-Clause
// Settling a reservation (Policy::settle()): the rules every algorithm
// follows, then GCRA's charges, refunds and saturation, each with the
// exact state it leaves and the decision that follows. The window
// algorithms' cases are in settle_window_test.cpp; random sequences
// against models in settle_random_test.cpp.
#include "throttle/gcra.hpp"
#include "throttle/policy.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

using namespace testing_support;

// What the key has left at `now`: what a free request is told.
int64_t
remaining(const Policy &p, const StoredSlot &slot, int64_t now)
{
    return slot.peek(p, now, 0).result.remaining;
}

TEST(Settle, AReservationThatWasRightChangesNothing)
{
    for (const char *name : kEveryAlgorithm) {
        const Policy p = limit_of_5(name);
        StoredSlot   slot;
        slot.hit(p, kEpoch, 3);
        const StoredSlot before = slot;

        slot.settle(p, 3, 3, kEpoch, kEpoch + 10 * kMs);

        EXPECT_TRUE(same_slot(slot, before)) << name;
    }
}

TEST(Settle, AChargeToAFreshKeyIsAllItHolds)
{
    for (const char *name : kEveryAlgorithm) {
        const Policy p = limit_of_5(name);
        // one the zone does not hold, and one it holds stale
        StoredSlot    unheld;
        StoredSlot    stale;
        const int64_t later = kEpoch + 10 * kSecond;
        stale.hit(p, kEpoch, 5);

        unheld.settle(p, 1, 4, later, later);
        stale.settle(p, 1, 4, later, later);

        // (a ring's slots beyond its entries may differ: they are not read)
        const StoredKey &key = unheld.key;
        expect_key(stale, key.state.words[0], key.state.words[1],
                   key.expire_at_us);
        for (const StoredSlot *slot : {&unheld, &stale}) {
            EXPECT_EQ(remaining(p, *slot, later), 2) << name;
            EXPECT_FALSE(slot->peek(p, later, 2).result.limited) << name;
            EXPECT_TRUE(slot->peek(p, later, 3).result.limited) << name;
        }
    }
}

TEST(Settle, ARefundToAFreshKeyDoesNothing)
{
    for (const char *name : kEveryAlgorithm) {
        const Policy p = limit_of_5(name);
        StoredSlot   unheld;
        StoredSlot   stale;
        stale.hit(p, kEpoch, 5);
        const StoredSlot before = stale;

        unheld.settle(p, 3, 0, kEpoch, kEpoch);
        stale.settle(p, 5, 0, kEpoch, kEpoch + 10 * kSecond);

        EXPECT_FALSE(unheld.held) << name;
        EXPECT_TRUE(same_slot(stale, before)) << name;
    }
}

TEST(Settle, AStaleKeyIsAFreshOneWhateverItsWordsSay)
{
    // a counter of now's window, stale: it counts nothing
    for (const char *name : {"fixed_window", "sliding_window"}) {
        const Policy p = limit_of_5(name);
        StoredKey    key;
        key.expire_at_us = kEpoch;
        key.state.words[0] = kEpoch;
        key.state.words[1] = 5;

        p.settle(key, nullptr, 1, 2, kEpoch, kEpoch + 1);

        EXPECT_EQ(key.state.words[1], 1) << name;
        EXPECT_GT(key.expire_at_us, kEpoch + 1) << name;
    }
}

TEST(Settle, ANegativeUsageIsNone)
{
    for (const char *name : kEveryAlgorithm) {
        const Policy p = limit_of_5(name);
        StoredSlot   negative;
        negative.hit(p, kEpoch, 5);
        StoredSlot none = negative;

        negative.settle(p, 5, -7, kEpoch, kEpoch);
        none.settle(p, 5, 0, kEpoch, kEpoch);

        EXPECT_TRUE(same_slot(negative, none)) << name;
        EXPECT_EQ(remaining(p, negative, kEpoch), 5) << name;
    }
}

TEST(Settle, StrictZonesAreLeftAsTheyAre)
{
    for (const char *name : kEveryAlgorithm) {
        const Policy p = limit_of_5(name, Mode::strict);
        StoredKey    key;
        key.expire_at_us = kEpoch + kSecond;
        key.state.words[0] = kEpoch;
        key.state.words[1] = 3;
        const StoredKey before = key;

        p.settle(key, nullptr, 1, 4, kEpoch, kEpoch);
        p.settle(key, nullptr, 3, 0, kEpoch, kEpoch);

        EXPECT_EQ(key.state.words[0], before.state.words[0]) << name;
        EXPECT_EQ(key.state.words[1], before.state.words[1]) << name;
        EXPECT_EQ(key.expire_at_us, before.expire_at_us) << name;
    }
}

// --- GCRA: T = 100 ms, tolerance 500 ms

TEST(SettleGcra, AChargeOverdrawsAndTheNextRequestWaitsForTheDebt)
{
    const Policy p = limit_of_5("gcra");
    StoredSlot   slot;
    slot.hit(p, kEpoch, 1);

    // 20 more units, 50 ms on: from the TAT, 100 ms ahead
    slot.settle(p, 1, 21, kEpoch, kEpoch + 50 * kMs);
    expect_key(slot, kEpoch + 2100 * kMs, 0, kEpoch + 2100 * kMs);

    // a unit fits once TAT + T - tolerance is reached: 1.7 s
    const ThrottleResult r = slot.peek(p, kEpoch + 50 * kMs, 1).result;
    EXPECT_TRUE(r.limited);
    EXPECT_EQ(r.remaining, 0);
    EXPECT_EQ(r.retry_after_us, 1650 * kMs);
    EXPECT_EQ(r.reset_after_us, 2050 * kMs);
    EXPECT_TRUE(slot.peek(p, kEpoch + 1700 * kMs - 1, 1).result.limited);
    EXPECT_FALSE(slot.hit(p, kEpoch + 1700 * kMs, 1).result.limited);
}

TEST(SettleGcra, ARefundGivesItsUnitsBack)
{
    const Policy p = limit_of_5("gcra");
    StoredSlot   slot;
    slot.hit(p, kEpoch, 5);

    slot.settle(p, 5, 2, kEpoch, kEpoch);

    expect_key(slot, kEpoch + 200 * kMs, 0, kEpoch + 200 * kMs);
    EXPECT_FALSE(slot.peek(p, kEpoch, 3).result.limited);
    EXPECT_TRUE(slot.peek(p, kEpoch, 4).result.limited);
}

TEST(SettleGcra, ARefundMovesTheTatBackNeverBeforeNow)
{
    // as gcra_refund.lua: TAT - T * units, and a key no later than now is
    // gone
    const Policy p = limit_of_5("gcra");
    StoredSlot   part;
    part.hit(p, kEpoch, 5);
    StoredSlot all = part;

    // 200 ms on, 2 of the 5 units have drained
    part.settle(p, 5, 3, kEpoch, kEpoch + 200 * kMs);
    expect_key(part, kEpoch + 300 * kMs, 0, kEpoch + 300 * kMs);
    EXPECT_EQ(remaining(p, part, kEpoch + 200 * kMs), 4);

    all.settle(p, 5, 0, kEpoch, kEpoch + 200 * kMs);
    expect_key(all, kEpoch + 200 * kMs, 0, kEpoch + 200 * kMs);
    EXPECT_EQ(remaining(p, all, kEpoch + 200 * kMs), 5);
    EXPECT_EQ(all.peek(p, kEpoch + 200 * kMs, 0).result.reset_after_us, 0);
}

TEST(SettleGcra, AHugeDebtSaturatesAndStillRejects)
{
    // 1r/d with the largest burst whose tolerance fits 2^51 us
    const int64_t day = 86'400 * kSecond;
    const Policy  p = make_test_policy("gcra", 1, day, 26'061);
    ASSERT_LE(p.window_us, kMaxToleranceUs);
    ASSERT_GT(p.window_us, kMaxToleranceUs - day);
    StoredSlot slot;
    slot.hit(p, kEpoch, 1);

    // 1e8 days: 2^62.9 us, beyond the cap; kMaxCost days and INT64_MAX
    // units: beyond 2^63 us
    for (int64_t settled : {int64_t{100'000'000}, kMaxCost, INT64_MAX}) {
        slot.settle(p, 1, settled, kEpoch, kEpoch);
        expect_key(slot, kEpoch + kMaxDebtUs, 0, kEpoch + kMaxDebtUs);
    }

    const ThrottleResult r = slot.peek(p, kEpoch, 1).result;
    EXPECT_TRUE(r.limited);
    EXPECT_EQ(r.remaining, 0);
    EXPECT_EQ(r.retry_after_us, kMaxDebtUs + day - p.window_us);
    EXPECT_EQ(r.reset_after_us, kMaxDebtUs);

    // and a refund as large leaves a fresh key
    slot.settle(p, INT64_MAX, 0, kEpoch, kEpoch);
    expect_key(slot, kEpoch, 0, kEpoch);
    EXPECT_EQ(remaining(p, slot, kEpoch), p.limit);
}

TEST(SettleGcra, TheDebtStopsWhereDecidingCouldOverflow)
{
    const int64_t t = 86'400 * kSecond;
    const int64_t latest = INT64_MAX - kMaxToleranceUs;

    EXPECT_EQ(gcra_settle(t, 0, kMaxCost, 0), kMaxDebtUs);
    EXPECT_EQ(gcra_settle(t, latest - 10, kMaxCost, latest - 10), latest);
    EXPECT_EQ(gcra_settle(t, latest, -kMaxCost, latest - 10), latest - 10);
    EXPECT_EQ(gcra_settle(t, INT64_MIN, -INT64_MAX, -5), -5);
}

} // namespace
} // namespace throttle
