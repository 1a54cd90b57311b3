// SPDX-License-Identifier: BSD-2-Clause
// sliding_log against hand-worked sequences and, over long random
// timelines, against a reference model that keeps the timestamps in a
// deque.
#include "throttle/policy.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

Policy
policy(int64_t count, int64_t period_us, int64_t burst)
{
    return make_test_policy("sliding_log", count, period_us, burst);
}

// One key held the way a zone holds it, state and ring: a request that
// passes is recorded, as the zone does once every zone passed it, with the
// expiry its decision named.
struct Slot {
    StoredSlot slot;

    Decision hit(const Policy &p, int64_t now, int64_t cost)
    {
        Decision d = slot.hit(p, now, cost);
        EXPECT_EQ(d.store, !d.result.limited && cost > 0);
        if (d.store) {
            EXPECT_EQ(slot.key.expire_at_us, d.expire_at_us);
        }
        return d;
    }
};

TEST(SlidingLog, FivePerSecondTheSixthWaitsForTheOldest)
{
    const Policy p = policy(5, kSecond, 0);
    const Step   steps[] = {
          {200, 1, false, 4, 1000, -1},
          {200, 1, false, 3, 1000, -1},
          {250, 1, false, 2, 1000, -1},
          {300, 1, false, 1, 1000, -1},
          {300, 1, false, 0, 1000, -1},
          {300, 1, true, 0, 1000, 900},
          {1199, 1, true, 0, 101, 1},
          // the two at 200 have left: 250, 300, 300 and this one
          {1200, 1, false, 1, 1000, -1},
          {1200, 2, true, 1, 1000, 50},  // once 250 leaves
          {1200, 3, true, 1, 1000, 100}, // once the first 300 leaves
          {1200, 6, true, 1, 1000, -1},  // never
          {1200, 0, false, 1, 1000, -1},
          {3000, 0, false, 5, 0, -1},
    };
    Slot slot;
    run(p, slot, steps, std::size(steps));
}

TEST(SlidingLog, BoundaryBurstIsRefused)
{
    // fixed_window admits all ten (see its test); here the five stay in
    // the window for a whole second.
    const Policy p = policy(5, kSecond, 0);
    Slot         slot;
    int          admitted = 0;
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 999 * kMs, 1).result.limited ? 0 : 1;
    }
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 1000 * kMs, 1).result.limited ? 0 : 1;
    }
    EXPECT_EQ(admitted, 5);
    ThrottleResult r = slot.hit(p, kEpoch + 1999 * kMs - 1, 5).result;
    EXPECT_TRUE(r.limited);
    EXPECT_EQ(r.retry_after_us, 1);
    EXPECT_FALSE(slot.hit(p, kEpoch + 1999 * kMs, 5).result.limited);
}

TEST(SlidingLog, CostAboveTheLimitNeverFits)
{
    const Policy p = policy(5, kSecond, 0);
    Slot         slot;
    slot.hit(p, kEpoch, 2);
    for (int64_t cost : {int64_t{6}, kMaxCost, INT64_MAX}) {
        Decision d = slot.hit(p, kEpoch + 100 * kMs, cost);
        EXPECT_TRUE(d.result.limited);
        EXPECT_EQ(d.result.retry_after_us, -1);
        EXPECT_EQ(d.result.remaining, 3);
        EXPECT_EQ(d.result.reset_after_us, 900 * kMs);
    }
    Decision d = decide_state(p, nullptr, kEpoch, 6);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, -1);
    EXPECT_EQ(d.result.remaining, 5);
    EXPECT_EQ(d.result.reset_after_us, 0);
    EXPECT_EQ(d.expire_at_us, 0);
}

TEST(SlidingLog, CostZeroRecordsNothing)
{
    const WindowParams params{kSecond, 3, 3};
    Decision d = sliding_log_decide(params, KeyState{}, nullptr, kEpoch, 0);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 3);
    EXPECT_EQ(d.result.reset_after_us, 0);
    EXPECT_EQ(d.expire_at_us, 0);

    KeyState state;
    int64_t  ring[3] = {};
    EXPECT_EQ(sliding_log_record(params, state, ring, kEpoch, 0), 0);
    EXPECT_EQ(state.words[1], 0);
}

TEST(SlidingLog, RingWrapsAroundInTimeOrder)
{
    const WindowParams params{kSecond, 3, 3};
    KeyState           state;
    int64_t            ring[3] = {-1, -1, -1};
    EXPECT_EQ(sliding_log_record(params, state, ring, 0, 1), kSecond);
    sliding_log_record(params, state, ring, 100, 1);
    EXPECT_EQ(sliding_log_record(params, state, ring, 200, 1), kSecond + 200);
    EXPECT_EQ(state.words[0], 0);
    EXPECT_EQ(state.words[1], 3);

    // Full until the entry at 0 leaves; then it makes room.
    EXPECT_TRUE(
        sliding_log_decide(params, state, ring, kSecond - 1, 1).result.limited);
    Decision d = sliding_log_decide(params, state, ring, kSecond, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.expire_at_us, 2 * kSecond);
    EXPECT_EQ(sliding_log_record(params, state, ring, kSecond, 1), 2 * kSecond);
    EXPECT_EQ(state.words[0], 1);
    EXPECT_EQ(state.words[1], 3);
    EXPECT_EQ(ring[0], kSecond);

    // The oldest is now at index 1: 100, 200, then 1 s.
    d = sliding_log_decide(params, state, ring, kSecond + 50, 2);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 200 + kSecond - (kSecond + 50));
    EXPECT_EQ(d.result.reset_after_us, kSecond - 50);

    // Deciding skips what has left (100) but keeps it; recording drops it
    // and reuses its slot.
    d = sliding_log_decide(params, state, ring, kSecond + 150, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(state.words[1], 3);
    sliding_log_record(params, state, ring, kSecond + 150, 1);
    EXPECT_EQ(state.words[0], 2);
    EXPECT_EQ(state.words[1], 3);
    EXPECT_EQ(ring[2], 200);
    EXPECT_EQ(ring[0], kSecond);
    EXPECT_EQ(ring[1], kSecond + 150);
    EXPECT_EQ(sliding_log_record(params, state, ring, kSecond + 150, 0),
              2 * kSecond + 150);
}

TEST(SlidingLog, ExpiredEntriesAreSkippedAndThenDropped)
{
    const WindowParams params{kSecond, 4, 4};
    KeyState           state;
    int64_t            ring[4] = {};
    for (int64_t t : {10, 20, 30, 40}) {
        sliding_log_record(params, state, ring, t, 1);
    }
    // At 1 s + 25 only 30 and 40 count.
    Decision d = sliding_log_decide(params, state, ring, kSecond + 25, 3);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 2);
    EXPECT_EQ(d.result.retry_after_us, 30 + kSecond - (kSecond + 25));
    EXPECT_EQ(d.result.reset_after_us, 40 + kSecond - (kSecond + 25));
    EXPECT_EQ(d.expire_at_us, 40 + kSecond);

    // Everything has left: as fresh, whatever the state still holds.
    d = sliding_log_decide(params, state, ring, 5 * kSecond, 4);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(sliding_log_record(params, state, ring, 5 * kSecond, 4),
              6 * kSecond);
    EXPECT_EQ(state.words[1], 4);
}

TEST(SlidingLog, AClockThatWentBackKeepsTheOrder)
{
    const WindowParams params{kSecond, 3, 3};
    KeyState           state;
    int64_t            ring[3] = {};
    sliding_log_record(params, state, ring, 1000, 2);

    // Recorded at 1000, not 500: the entries stay sorted.
    Decision d = sliding_log_decide(params, state, ring, 500, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.reset_after_us, 1000 + kSecond - 500);
    EXPECT_EQ(d.expire_at_us, 1000 + kSecond);
    EXPECT_EQ(sliding_log_record(params, state, ring, 500, 1), 1000 + kSecond);
    EXPECT_EQ(ring[2], 1000);

    d = sliding_log_decide(params, state, ring, 600, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 1000 + kSecond - 600);
    EXPECT_FALSE(sliding_log_decide(params, state, ring, 1000 + kSecond, 3)
                     .result.limited);
}

TEST(SlidingLog, AStateLeftByAnotherLimitStaysInTheRing)
{
    // A reload that lowered the limit may leave indexes beyond the ring:
    // they are brought back into it, not followed.
    const WindowParams params{kSecond, 2, 2};
    int64_t            ring[2] = {100, 200};
    KeyState           state;
    state.words[0] = 7;
    state.words[1] = 9;
    Decision d = sliding_log_decide(params, state, ring, 300, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    // Full, nothing expired: the oldest gives way.
    EXPECT_EQ(sliding_log_record(params, state, ring, 300, 1), 300 + kSecond);
    EXPECT_GE(state.words[0], 0);
    EXPECT_LT(state.words[0], 2);
    EXPECT_LE(state.words[1], 2);
}

// The reference: the admitted timestamps in a deque, oldest first.
struct ReferenceSlidingLog {
    int64_t             w, limit;
    std::deque<int64_t> log;

    ThrottleResult hit(int64_t now, int64_t cost)
    {
        std::vector<int64_t> in_window;
        for (int64_t ts : log) {
            if (now < ts + w) {
                in_window.push_back(ts);
            }
        }
        const auto     count = static_cast<int64_t>(in_window.size());
        ThrottleResult r;
        r.limit = limit;
        r.remaining = limit - count;
        if (cost <= limit && count + cost <= limit) {
            while (!log.empty() && log.front() + w <= now) {
                log.pop_front();
            }
            const int64_t at = log.empty() ? now : std::max(now, log.back());
            log.insert(log.end(), static_cast<size_t>(cost), at);
            r.remaining -= cost;
            if (cost > 0) {
                in_window.push_back(at);
            }
        } else {
            r.limited = true;
            if (cost <= limit) {
                // Enough have left once the (count + cost - limit)-th
                // oldest has.
                r.retry_after_us =
                    in_window[static_cast<size_t>(count + cost - limit - 1)] + w
                    - now;
            }
        }
        if (!in_window.empty()) {
            r.reset_after_us = in_window.back() + w - now;
        }
        return r;
    }
};

TEST(SlidingLog, MatchesReferenceOverRandomTimelines)
{
    RandomTimelines t("sliding_log", 53, {5, 100, kDefaultLogMax / 2});
    int64_t         rejected = 0;
    while (t.next_round()) {
        ReferenceSlidingLog ref{t.period(), t.limit(), {}};
        Slot                slot;
        while (t.next_step()) {
            const ThrottleResult want = ref.hit(t.now(), t.cost());
            const Decision       got = slot.hit(t.policy(), t.now(), t.cost());
            // The slot's own checks (what is stored, the expiry recorded).
            ASSERT_FALSE(HasFailure()) << t.where();
            ASSERT_NO_FATAL_FAILURE(assert_same_result(got.result, want, t));
            ASSERT_EQ(got.result.retry_after_us, want.retry_after_us)
                << t.where();
            rejected += want.limited ? 1 : 0;
        }
    }
    EXPECT_GT(rejected, t.steps() / 10);
    EXPECT_LT(rejected, t.steps() * 9 / 10);
}

} // namespace
} // namespace throttle
