// SPDX-License-Identifier: BSD-2-Clause
// fixed_window against hand-worked sequences and, over long random
// timelines, against a reference model that keeps a count per window index.
#include "throttle/policy.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

#include <map>

namespace throttle {
namespace {

using namespace testing_support;

Policy
policy(int64_t count, int64_t period_us, int64_t burst)
{
    return make_test_policy("fixed_window", count, period_us, burst);
}

// decide() hands back the state to store.
using Slot = StoredSlot;

TEST(FixedWindow, FivePerSecondTheSixthWaitsForTheWindowEnd)
{
    const Policy p = policy(5, kSecond, 0);
    const Step   steps[] = {
          {200, 1, false, 4, 800, -1},  {200, 1, false, 3, 800, -1},
          {250, 1, false, 2, 750, -1},  {300, 1, false, 1, 700, -1},
          {300, 1, false, 0, 700, -1},  {300, 1, true, 0, 700, 700},
          {999, 1, true, 0, 1, 1},      {1000, 1, false, 4, 1000, -1},
          {1500, 4, false, 0, 500, -1}, {1500, 1, true, 0, 500, 500},
    };
    Slot slot;
    run(p, slot, steps, std::size(steps));
}

TEST(FixedWindow, BurstAddsToTheWindowAndCostsCountUnits)
{
    // 3r/m burst 2: 5 units a minute.
    const Policy p = policy(3, 60 * kSecond, 2);
    EXPECT_EQ(p.limit, 5);
    const Step steps[] = {
        {10'000, 3, false, 2, 50'000, -1},
        {20'000, 3, true, 2, 40'000, 40'000}, // 3 + 3 > 5: nothing counted
        {20'000, 2, false, 0, 40'000, -1},
        {30'000, 0, false, 0, 30'000, -1}, // cost 0 fits a full window
        {60'000, 5, false, 0, 60'000, -1},
    };
    Slot slot;
    run(p, slot, steps, std::size(steps));
}

TEST(FixedWindow, BoundaryBurstAdmitsTwiceTheLimitInOneMillisecond)
{
    // The known weakness: 5 in the last millisecond of a window and 5 in the
    // first of the next all pass (sliding_window and sliding_log refuse the
    // second five, see their tests).
    const Policy p = policy(5, kSecond, 0);
    Slot         slot;
    int          admitted = 0;
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 999 * kMs, 1).result.limited ? 0 : 1;
    }
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 1000 * kMs, 1).result.limited ? 0 : 1;
    }
    EXPECT_EQ(admitted, 10);
}

TEST(FixedWindow, CostAboveTheLimitNeverFits)
{
    const Policy p = policy(5, kSecond, 0);
    Slot         slot;
    slot.hit(p, kEpoch, 2);
    for (int64_t cost : {int64_t{6}, kMaxCost, INT64_MAX}) {
        Decision d = slot.hit(p, kEpoch + 100 * kMs, cost);
        EXPECT_TRUE(d.result.limited);
        EXPECT_FALSE(d.store);
        EXPECT_EQ(d.result.retry_after_us, -1);
        EXPECT_EQ(d.result.remaining, 3);
        EXPECT_EQ(d.result.reset_after_us, 900 * kMs);
    }
    // the fresh key too, with nothing to reset
    Decision d = decide_state(p, nullptr, kEpoch, 6);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, -1);
    EXPECT_EQ(d.result.remaining, 5);
    EXPECT_EQ(d.result.reset_after_us, 0);
}

TEST(FixedWindow, CostZeroOnAFreshKeyCountsNothing)
{
    const Policy p = policy(5, kSecond, 0);
    Decision     d = decide_state(p, nullptr, kEpoch + 5, 0);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 5);
    EXPECT_EQ(d.result.reset_after_us, 0);
    EXPECT_EQ(d.result.retry_after_us, -1);
}

TEST(FixedWindow, StateIsTheWindowStartAndItsCount)
{
    const Policy  p = policy(10, 60 * kSecond, 0);
    const int64_t now = kEpoch + 61 * kSecond + 7;
    Decision      d = decide_state(p, nullptr, now, 3);
    ASSERT_TRUE(d.store);
    EXPECT_EQ(d.state.words[0], kEpoch + 60 * kSecond);
    EXPECT_EQ(d.state.words[1], 3);
    EXPECT_EQ(d.expire_at_us, kEpoch + 120 * kSecond);

    // A rejection stores nothing.
    Decision full = decide_state(p, &d.state, now, 8);
    EXPECT_TRUE(full.result.limited);
    EXPECT_FALSE(full.store);

    // The counter of another window is not this one's, whichever side.
    for (int64_t other : {kEpoch, kEpoch + 120 * kSecond}) {
        KeyState s;
        s.words[0] = other;
        s.words[1] = 10;
        Decision r = decide_state(p, &s, now, 10);
        EXPECT_FALSE(r.result.limited) << other;
        EXPECT_EQ(r.result.remaining, 0);
    }

    // A count above the limit (stored before a reload lowered it).
    KeyState s;
    s.words[0] = kEpoch + 60 * kSecond;
    s.words[1] = 15;
    Decision r = decide_state(p, &s, now, 1);
    EXPECT_TRUE(r.result.limited);
    EXPECT_EQ(r.result.remaining, 0);
    EXPECT_EQ(r.result.retry_after_us, 59 * kSecond - 7);
}

TEST(FixedWindow, WindowsStartOnTheWallClock)
{
    // 1r/d: the day ends at midnight UTC whenever the request came.
    const Policy  p = policy(1, 86'400 * kSecond, 0);
    Slot          slot;
    const int64_t noon = kEpoch + 12 * 3600 * kSecond;
    EXPECT_FALSE(slot.hit(p, noon, 1).result.limited);
    ThrottleResult r = slot.hit(p, noon + 1, 1).result;
    EXPECT_TRUE(r.limited);
    EXPECT_EQ(r.retry_after_us, 12 * 3600 * kSecond - 1);
    EXPECT_FALSE(slot.hit(p, kEpoch + 86'400 * kSecond, 1).result.limited);
}

// The reference: a count per window index, kept forever.
struct ReferenceFixedWindow {
    int64_t                    w, limit;
    std::map<int64_t, int64_t> counts;

    ThrottleResult hit(int64_t now, int64_t cost)
    {
        const int64_t  index = now / w;
        const int64_t  end = (index + 1) * w;
        int64_t       &n = counts[index];
        ThrottleResult r;
        r.limit = limit;
        if (cost <= limit && n + cost <= limit) {
            n += cost;
        } else {
            r.limited = true;
            if (cost <= limit) {
                r.retry_after_us = end - now;
            }
        }
        r.remaining = limit - n;
        r.reset_after_us = n == 0 ? 0 : end - now;
        return r;
    }
};

TEST(FixedWindow, MatchesReferenceOverRandomTimelines)
{
    RandomTimelines t("fixed_window", 51,
                      {5, 100, 100'000, kMaxSlidingWindowLimit});
    int64_t         rejected = 0;
    while (t.next_round()) {
        ReferenceFixedWindow ref{t.period(), t.limit(), {}};
        Slot                 slot;
        while (t.next_step()) {
            const ThrottleResult want = ref.hit(t.now(), t.cost());
            const Decision       got = slot.hit(t.policy(), t.now(), t.cost());
            ASSERT_NO_FATAL_FAILURE(assert_same_result(got.result, want, t));
            ASSERT_EQ(got.result.retry_after_us, want.retry_after_us)
                << t.where();
            ASSERT_EQ(got.store, !want.limited) << t.where();
            rejected += want.limited ? 1 : 0;
        }
    }
    // Both outcomes were exercised, not just one.
    EXPECT_GT(rejected, t.steps() / 10);
    EXPECT_LT(rejected, t.steps() * 9 / 10);
}

} // namespace
} // namespace throttle
