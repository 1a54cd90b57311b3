// SPDX-License-Identifier: BSD-2-Clause
// Settling a reservation (Policy::settle()) in the window algorithms:
// fixed_window, sliding_window and sliding_log, at 5 units a second, case
// by case with the exact state each leaves and the decisions that follow;
// then the largest debts a window or a log can hold.
#include "throttle/policy.hpp"
#include "throttle/sliding_log.hpp"
#include "throttle/windows.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kDay = 86'400 * kSecond;

// A time `ms` into the window starting at kEpoch.
constexpr int64_t
at_ms(int64_t ms)
{
    return kEpoch + ms * kMs;
}

Policy
five_a_second(std::string_view algorithm)
{
    return make_test_policy(algorithm, 5, kSecond, 0);
}

// Whether `cost` units pass at `now` while one more does not.
void
expect_room(const Policy &p, const StoredSlot &slot, int64_t now, int64_t cost)
{
    EXPECT_FALSE(slot.peek(p, now, cost).result.limited) << cost;
    EXPECT_TRUE(slot.peek(p, now, cost + 1).result.limited) << cost + 1;
}

// A request reserves units, another one may (0 units: none), then the
// first is settled; times in ms after kEpoch. The key after it: its state
// words (a window's start in ms; for a log, the ring's head), pack_counts()
// of the counts in word 1 (the previous window's and the current one's; a
// fixed window's count and a log's size in the low half) and its expiry;
// then the units that fit (-1: not even a free request) and a unit's
// retry_after_us (-1: it fits).
struct SettleCase {
    const char *algorithm;
    int64_t     reserved_ms, reserved_units, other_ms, other_units;
    int64_t     now_ms, settled_units;
    int64_t     word0, high, low, expire_ms;
    int64_t     room, retry_us;
};

const SettleCase kCases[] = {
    // a charge overdraws now's window until it ends
    {"fixed_window", 100, 2, 0, 0, 300, 9, 0, 0, 9, 1000, -1, 700 * kMs},
    // a charge in a new window counts there
    {"fixed_window", 900, 4, 0, 0, 1100, 6, 1000, 0, 2, 2000, 3, -1},
    // a refund gives back to its window while it lasts
    {"fixed_window", 100, 3, 200, 2, 400, 0, 0, 0, 2, 1000, 3, -1},
    // an emptied window is a fresh key's
    {"fixed_window", 200, 2, 0, 0, 500, 0, 0, 0, 0, 500, 5, -1},
    // a refund of the window before gives nothing
    {"fixed_window", 900, 5, 1100, 2, 1200, 0, 1000, 0, 2, 2000, 3, -1},
    // a charge overdraws and the 12 weigh on the next window: 4 of them
    // two thirds into it (rounded up to the microsecond)
    {"sliding_window", 200, 2, 0, 0, 500, 12, 0, 0, 12, 2000, -1, 1'166'667},
    // a charge moves the counters on to now's window
    {"sliding_window", 800, 3, 0, 0, 1200, 4, 1000, 3, 1, 3000, 1, -1},
    // a refund gives back to the current window
    {"sliding_window", 100, 5, 0, 0, 300, 2, 0, 0, 2, 2000, 3, -1},
    // a refund gives back to the window before: halfway through this one,
    // 5 weigh 2.5, 1 weighs 0.5
    {"sliding_window", 100, 5, 0, 0, 1500, 1, 1000, 1, 0, 2000, 4, -1},
    // a refund of the window before leaves the current one
    {"sliding_window", 900, 3, 1100, 2, 1200, 0, 1000, 0, 2, 3000, 3, -1},
    // emptied counters are a fresh key's
    {"sliding_window", 1100, 2, 0, 0, 1300, 0, 1000, 0, 0, 1300, 5, -1},
    // a refund of an older window gives nothing
    {"sliding_window", 100, 5, 2100, 1, 2200, 0, 2000, 0, 1, 4000, 4, -1},
    // a charge records entries at now
    {"sliding_log", 100, 1, 0, 0, 300, 3, 0, 0, 3, 1300, 2, -1},
    // a debt is at most a ring full at now: the entries at 100 ms give way
    {"sliding_log", 100, 2, 0, 0, 300, 10, 2, 0, 5, 1300, 0, kSecond},
    // a refund removes the reservation's entries
    {"sliding_log", 100, 3, 200, 2, 400, 1, 0, 0, 3, 1200, 2, -1},
    // a refund of entries that left gives nothing
    {"sliding_log", 100, 3, 1050, 1, 1100, 0, 0, 0, 4, 2050, 4, -1},
    // an emptied log is a fresh key's
    {"sliding_log", 100, 2, 0, 0, 300, 0, 0, 0, 0, 300, 5, -1},
};

TEST(SettleWindows, CaseByCase)
{
    for (const SettleCase &c : kCases) {
        SCOPED_TRACE(testing::Message()
                     << c.algorithm << " settled at " << c.now_ms << " ms");
        const Policy  p = five_a_second(c.algorithm);
        const int64_t now = at_ms(c.now_ms);
        StoredSlot    slot;
        ASSERT_FALSE(
            slot.hit(p, at_ms(c.reserved_ms), c.reserved_units).result.limited);
        if (c.other_units > 0) {
            ASSERT_FALSE(
                slot.hit(p, at_ms(c.other_ms), c.other_units).result.limited);
        }

        slot.settle(p, c.reserved_units, c.settled_units, at_ms(c.reserved_ms),
                    now);

        const bool log = p.log_slots > 0;
        expect_key(slot, log ? c.word0 : at_ms(c.word0),
                   pack_counts(c.high, c.low), at_ms(c.expire_ms));
        if (c.room >= 0) {
            expect_room(p, slot, now, c.room);
        } else {
            EXPECT_TRUE(slot.peek(p, now, 0).result.limited);
        }
        // a unit passes once the debt has drained, not a microsecond before
        EXPECT_EQ(slot.peek(p, now, 1).result.retry_after_us, c.retry_us);
        if (c.retry_us > 0) {
            EXPECT_TRUE(slot.peek(p, now + c.retry_us - 1, 1).result.limited);
            EXPECT_FALSE(slot.peek(p, now + c.retry_us, 1).result.limited);
        }
    }
}

TEST(SettleWindowCounts, ACounterNeverGoesBelowNothing)
{
    for (PreviousWindow previous :
         {PreviousWindow::ignored, PreviousWindow::weighs})
    {
        KeyState s;
        s.words[0] = kEpoch;
        s.words[1] = pack_counts(0, 2);
        int64_t expire_at_us = kEpoch + 2 * kSecond;

        settle_window_counts(previous, {kSecond, 5, 0}, -5, kEpoch, kEpoch + 1,
                             s, expire_at_us);

        EXPECT_EQ(s.words[1], 0);
        EXPECT_EQ(expire_at_us, kEpoch + 1);
    }
}

TEST(SettleWindowCounts, AFixedWindowCarriesNothingIntoTheNext)
{
    // (a zone reads a key of an ended window as stale before this: here
    // is what settle_window_counts() makes of one all the same)
    KeyState s;
    s.words[0] = kEpoch;
    s.words[1] = 5;
    int64_t expire_at_us = kEpoch + kSecond;

    settle_window_counts(PreviousWindow::ignored, {kSecond, 5, 0}, -5, kEpoch,
                         kEpoch + kSecond, s, expire_at_us);
    EXPECT_EQ(s.words[1], 5);

    settle_window_counts(PreviousWindow::ignored, {kSecond, 5, 0}, 1, kEpoch,
                         kEpoch + kSecond, s, expire_at_us);
    EXPECT_EQ(s.words[0], kEpoch + kSecond);
    EXPECT_EQ(s.words[1], 1);
    EXPECT_EQ(expire_at_us, kEpoch + 2 * kSecond);
}

TEST(SettleSlidingLog, ARefundKeepsTheRingInOrderAcrossItsEnd)
{
    const Policy p = five_a_second("sliding_log");
    StoredSlot   slot;
    slot.hit(p, at_ms(100), 2);
    slot.hit(p, at_ms(1050), 1);
    // the two at 100 ms have left: 1050 ms in slot 2, 1150 in slots 3, 4
    // and 0, 1200 in slot 1
    slot.hit(p, at_ms(1150), 3);
    slot.hit(p, at_ms(1200), 1);
    expect_key(slot, 2, 5, at_ms(2200));

    slot.settle(p, 3, 1, at_ms(1150), at_ms(1300));

    expect_key(slot, 2, 3, at_ms(2200));
    EXPECT_EQ(slot.log[2], at_ms(1050));
    EXPECT_EQ(slot.log[3], at_ms(1150));
    EXPECT_EQ(slot.log[4], at_ms(1200));
    expect_room(p, slot, at_ms(1300), 2);
    EXPECT_EQ(slot.peek(p, at_ms(1300), 3).result.retry_after_us, 750 * kMs);
}

// --- the largest debts

TEST(SettleWindows, ACounterSaturatesAtTheLargestCount)
{
    // 2e9 units a day: the largest limit
    for (const char *name : {"fixed_window", "sliding_window"}) {
        const Policy p =
            make_test_policy(name, 1'000'000'000, kDay, 1'000'000'000);
        StoredSlot slot;
        slot.hit(p, kEpoch, 1);

        slot.settle(p, 1, INT64_MAX, kEpoch, kEpoch);
        const bool    fixed = std::string_view(name) == "fixed_window";
        const int64_t full =
            fixed ? kMaxWindowCount : pack_counts(0, kMaxWindowCount);
        expect_key(slot, kEpoch, full, kEpoch + (fixed ? 1 : 2) * kDay);
        slot.settle(p, 0, kMaxCost, kEpoch, kEpoch + 1);
        EXPECT_EQ(slot.key.state.words[1], full) << name;

        const ThrottleResult r = slot.peek(p, kEpoch + 1, 1).result;
        EXPECT_TRUE(r.limited) << name;
        EXPECT_EQ(r.remaining, 0) << name;
        EXPECT_GT(r.retry_after_us, 0) << name;
        EXPECT_LE(r.retry_after_us, 2 * kDay) << name;
    }
}

TEST(SettleWindows, BothSlidingCountersSaturate)
{
    const Policy p =
        make_test_policy("sliding_window", 1'000'000'000, kDay, 1'000'000'000);
    StoredSlot slot;
    slot.settle(p, 0, INT64_MAX, kEpoch, kEpoch);
    slot.settle(p, 0, INT64_MAX, kEpoch + kDay, kEpoch + kDay);

    expect_key(slot, kEpoch + kDay,
               pack_counts(kMaxWindowCount, kMaxWindowCount),
               kEpoch + 3 * kDay);
    const ThrottleResult r = slot.peek(p, kEpoch + kDay, p.limit).result;
    EXPECT_TRUE(r.limited);
    EXPECT_EQ(r.retry_after_us, 2 * kDay);
}

TEST(SettleWindows, ALogSaturatesAtAFullRing)
{
    const Policy p = make_test_policy("sliding_log", 100, kDay, 0);
    StoredSlot   slot;
    slot.hit(p, kEpoch, 1);

    slot.settle(p, 1, INT64_MAX, kEpoch, kEpoch + 1);
    expect_key(slot, 1, 100, kEpoch + 1 + kDay);
    EXPECT_EQ(slot.peek(p, kEpoch + 1, 1).result.retry_after_us, kDay);

    // the reservation's own entry gave way: nothing of it to give back
    const StoredSlot before = slot;
    slot.settle(p, INT64_MAX, 0, kEpoch, kEpoch + 2);
    EXPECT_TRUE(same_slot(slot, before));

    // a refund as large of the entries at kEpoch + 1 takes them all
    slot.settle(p, INT64_MAX, 0, kEpoch + 1, kEpoch + 2);
    expect_key(slot, 1, 0, kEpoch + 2);
}

} // namespace
} // namespace throttle
