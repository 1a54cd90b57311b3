// SPDX-License-Identifier: BSD-2-Clause
// sliding_window against hand-worked sequences and, over long random
// timelines, against a reference model that keeps every admitted request
// and searches for the retry time instead of solving for it.
#include "throttle/policy.hpp"
#include "window_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

Policy
policy(int64_t count, int64_t period_us, int64_t burst)
{
    return make_test_policy("sliding_window", count, period_us, burst);
}

// decide() hands back the state to store.
using Slot = StoredSlot;

KeyState
packed(int64_t start, int64_t prev, int64_t cur)
{
    KeyState s;
    s.words[0] = start;
    s.words[1] = static_cast<int64_t>(static_cast<uint64_t>(prev) << 32
                                      | static_cast<uint64_t>(cur));
    return s;
}

TEST(SlidingWindow, FivePerSecondTheSixthWaitsForTheWeightToFall)
{
    // Five in a window count fully until it ends; in the next they weigh 5 *
    // (1 - elapsed): the sixth fits once that is 4, 200 ms into it.
    const Policy p = policy(5, kSecond, 0);
    const Step   steps[] = {
          {200, 1, false, 4, 1800, -1},
          {200, 1, false, 3, 1800, -1},
          {250, 1, false, 2, 1750, -1},
          {300, 1, false, 1, 1700, -1},
          {300, 1, false, 0, 1700, -1},
          {300, 1, true, 0, 1700, 900},
          {999, 1, true, 0, 1001, 201},
          {1000, 1, true, 0, 1000, 200},
          {1199, 1, true, 0, 801, 1},
          {1200, 1, false, 0, 1800, -1},
          {1200, 1, true, 0, 1800, 200},
          {1600, 2, false, 0, 1400, -1},
          // 5 * (1 - e) + 3 + 2 <= 5 only as the window ends: then 3 + 2
          {1600, 2, true, 0, 1400, 400},
          {2000, 2, false, 0, 2000, -1},
          // 2 + 5 fits only once the 2 weigh nothing, two windows on
          {2000, 5, true, 0, 2000, 2000},
          {4000, 5, false, 0, 2000, -1},
    };
    Slot slot;
    run(p, slot, steps, std::size(steps));
}

TEST(SlidingWindow, RemainingRoundsTheWeightedCountDown)
{
    // 10r/m with 10 counted in the previous minute: 15 s in, they weigh
    // 7.5; the third request would make 10.5.
    const Policy  p = policy(10, 60 * kSecond, 0);
    Slot          slot;
    const int64_t t = 15'000; // ms into the current minute
    slot.held = true;
    slot.key.state = packed(kEpoch - 60 * kSecond, 0, 10);
    slot.key.expire_at_us = kEpoch + 60 * kSecond;
    const Step steps[] = {
        {t, 1, false, 1, 105'000, -1},    // 7.5 + 0 + 1 = 8.5
        {t, 1, false, 0, 105'000, -1},    // 7.5 + 1 + 1 = 9.5
        {t, 1, true, 0, 105'000, 3'000},  // at 18 s: 7 + 2 + 1 = 10
        {t, 3, true, 0, 105'000, 15'000}, // at 30 s: 5 + 2 + 3 = 10
        {t, 8, true, 0, 105'000, 45'000}, // 2 + 8 as the next window starts
        {t, 0, false, 0, 105'000, -1},    {t, 11, true, 0, 105'000, -1},
    };
    run(p, slot, steps, std::size(steps));
}

TEST(SlidingWindow, WeightedCountRoundsInTheDocumentedOrder)
{
    // previous x (window - elapsed) / window, in that order, as
    // docs/algorithms.md writes it: 440 ms in, 25 of the previous second
    // weigh 25 * 560000 / 1e6 = 14 exactly, as the Lua twin has it;
    // 25 * (560000 / 1e6) would give 14.000000000000002, and 10 left
    // instead of 11.
    const Policy   p = policy(25, kSecond, 0);
    const KeyState s = packed(kEpoch, 0, 25);
    const int64_t  now = kEpoch + kSecond + 440 * kMs;
    EXPECT_EQ(decide_state(p, &s, now, 0).result.remaining, 11);
    Decision d = decide_state(p, &s, now, 12);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 11);
    d = decide_state(p, &s, now, 11);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);

    // The cost is added last: 1 unit of the previous day weighs 1.39e-7
    // 12 ms before the end of this one, 2^30 - 1 + 1.39e-7 rounds to
    // 2^30 - 1 + 2^-23, and adding 1 rounds that to 2^30, which fits;
    // 1.39e-7 + 2^30 would not.
    const int64_t  day = 86'400 * kSecond;
    const int64_t  l = int64_t{1} << 30;
    const Policy   big = policy(l, day, 0);
    const KeyState full = packed(kEpoch + day, 1, l - 1);
    d = decide_state(big, &full, kEpoch + 2 * day - 12 * kMs, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_TRUE(decide_state(big, &full, kEpoch + 2 * day - 16 * kMs, 1)
                    .result.limited);
}

TEST(SlidingWindow, BoundaryBurstIsRefused)
{
    // fixed_window admits all ten (see its test); here the five of the
    // previous window still weigh almost 5 a millisecond later.
    const Policy p = policy(5, kSecond, 0);
    Slot         slot;
    int          admitted = 0;
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 999 * kMs, 1).result.limited ? 0 : 1;
    }
    for (int i = 0; i < 5; i++) {
        admitted += slot.hit(p, kEpoch + 1001 * kMs, 1).result.limited ? 0 : 1;
    }
    EXPECT_EQ(admitted, 5);
}

TEST(SlidingWindow, CostAboveTheLimitNeverFits)
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
        EXPECT_EQ(d.result.reset_after_us, 1900 * kMs);
    }
    Decision d = decide_state(p, nullptr, kEpoch, 6);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, -1);
    EXPECT_EQ(d.result.remaining, 5);
    EXPECT_EQ(d.result.reset_after_us, 0);
}

TEST(SlidingWindow, CostZeroOnAFreshKeyCountsNothing)
{
    const Policy p = policy(5, kSecond, 0);
    Decision     d = decide_state(p, nullptr, kEpoch + 5, 0);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 5);
    EXPECT_EQ(d.result.reset_after_us, 0);
    EXPECT_EQ(d.result.retry_after_us, -1);
}

TEST(SlidingWindow, StateNormalisesToTheCurrentWindow)
{
    const Policy  p = policy(10, 60 * kSecond, 0);
    const int64_t start = kEpoch + 60 * kSecond;
    const int64_t now = start + 30 * kSecond;

    // Stored this window: prev 4 weighs 2, cur 3.
    KeyState s = packed(start, 4, 3);
    Decision d = decide_state(p, &s, now, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 4);
    ASSERT_TRUE(d.store);
    EXPECT_EQ(d.state.words[0], start);
    EXPECT_EQ(d.state.words[1], packed(start, 4, 4).words[1]);
    EXPECT_EQ(d.expire_at_us, start + 120 * kSecond);
    EXPECT_EQ(d.result.reset_after_us, 90 * kSecond);

    // Stored the window before: its current becomes the previous.
    s = packed(start - 60 * kSecond, 4, 3);
    d = decide_state(p, &s, now, 1);
    EXPECT_EQ(d.result.remaining, 7); // 10 - 1.5 - 1
    EXPECT_EQ(d.state.words[1], packed(start, 3, 1).words[1]);

    // A rejection keeps the state, and reports it: prev only.
    s = packed(start - 60 * kSecond, 4, 10);
    d = decide_state(p, &s, start + 1, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_FALSE(d.store);
    EXPECT_EQ(d.result.reset_after_us, 60 * kSecond - 1);

    // Anything older, or newer (the clock went back), counts nothing.
    for (int64_t w : {start - 120 * kSecond, start + 60 * kSecond}) {
        s = packed(w, 10, 10);
        d = decide_state(p, &s, now, 10);
        EXPECT_FALSE(d.result.limited) << w;
        EXPECT_EQ(d.state.words[1], packed(start, 0, 10).words[1]);
    }

    // Counters above the limit (stored before a reload lowered it).
    s = packed(start, 30, 20);
    d = decide_state(p, &s, now, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    // 20 * (1 - e) + 1 <= 10 at e = 33 s into the next window
    EXPECT_EQ(d.result.retry_after_us, 63 * kSecond);
}

TEST(SlidingWindow, CountersRoundTripAtTheLargestLimit)
{
    const int64_t max = kMaxSlidingWindowLimit;
    EXPECT_FALSE(try_policy("sliding_window", max, kSecond, 1));
    const Policy p = policy(max - 1, 86'400 * kSecond, 1);
    ASSERT_EQ(p.limit, max);

    // A full day, then the next: both counters at 2^31 - 1 share the word.
    const Decision first = decide_state(p, nullptr, kEpoch, max);
    ASSERT_FALSE(first.result.limited);
    EXPECT_EQ(first.state.words[1], max);
    const int64_t day = 86'400 * kSecond;
    // max weighs max / 2 + 0.5 half a day on
    Decision d =
        decide_state(p, &first.state, kEpoch + day + day / 2, max / 2 + 1);
    EXPECT_TRUE(d.result.limited);
    d = decide_state(p, &first.state, kEpoch + day + day / 2, max / 2);
    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(d.state.words[0], kEpoch + day);
    EXPECT_EQ(d.state.words[1], int64_t{0x7fff'ffff'3fff'ffff});
    EXPECT_EQ(d.result.remaining, 0); // max - (max / 2 + 0.5) - max / 2

    KeyState both = packed(kEpoch + day, max, max);
    EXPECT_EQ(both.words[1], int64_t{0x7fff'ffff'7fff'ffff});
    d = decide_state(p, &both, kEpoch + 2 * day + 1, 0);
    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(d.state.words[1], packed(0, max, 0).words[1]);
    EXPECT_EQ(d.result.reset_after_us, day - 1);
    // the previous max weighs max * (day - 1) / day: max - 1 after rounding
    // down
    EXPECT_EQ(d.result.remaining, 0);
    d = decide_state(p, &both, kEpoch + 2 * day + day / 2, max / 2);
    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    d = decide_state(p, &d.state, kEpoch + 2 * day + day / 2, 1);
    EXPECT_TRUE(d.result.limited);
    // The half unit over goes at max / day (0.025) a microsecond.
    EXPECT_EQ(d.result.retry_after_us, 21);
}

TEST(SlidingWindow, RetryIsTheExactAnswerNotARoundingOfTheLimit)
{
    // At 1e9 units a day, 1e9 + x rounds to 1e9 for x < 2^-24: one unit of
    // the previous day weighs less than that in its last 5149 us, so the
    // doubles let a request of the whole limit pass then. The retry time is
    // still the exact one, when the previous day's unit weighs nothing.
    const int64_t  day = 86'400 * kSecond;
    const Policy   p = policy(1'000'000'000, day, 0);
    const int64_t  limit = p.limit;
    const KeyState s = packed(kEpoch, 0, 1);
    const int64_t  now = kEpoch + day + 10;
    Decision       d = decide_state(p, &s, now, limit);
    ASSERT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, day - 10);
    EXPECT_TRUE(
        decide_state(p, &s, kEpoch + 2 * day - 5150, limit).result.limited);
    EXPECT_FALSE(
        decide_state(p, &s, kEpoch + 2 * day - 5149, limit).result.limited);
}

// The reference: every admitted request, the counters summed per window
// from them, and the retry time found by bisection instead of solved for.
//
// The weighted count's doubles are the definition both twins agree on, so
// the reference evaluates the same expression to decide. For the retry time
// they are not enough: next to a large limit, a weighted count under half
// its last place (6e-8 at 1e9) is rounded away, and "fits" turns true up to
// ~10 ms (day windows, limits near 2^31) before the exact count allows it. The
// decision never looks there (its search starts at the exact solution), so the
// reference asks for the first microsecond at which both the exact count (in
// integers) and the doubles let the request pass: never earlier than the true
// answer, and never a time at which the decision would still refuse it. The
// decision's closed form is itself rounded, so it may land one microsecond
// earlier, when the exact answer is a hair past a whole microsecond and the
// doubles already pass there: rounds_to_fit() tells those apart from a mistake.
struct ReferenceSlidingWindow {
    int64_t w, limit;
    struct Event {
        int64_t at, units;
    };
    std::vector<Event>   events;     // in time order
    std::vector<int64_t> cumulative; // units admitted up to each event

    int64_t units_before(int64_t t) const
    {
        auto it = std::lower_bound(
            events.begin(), events.end(), t,
            [](const Event &e, int64_t v) { return e.at < v; });
        const auto i = it - events.begin();
        return i == 0 ? 0 : cumulative[static_cast<size_t>(i - 1)];
    }
    int64_t units_in(int64_t from, int64_t to) const
    {
        return units_before(to) - units_before(from);
    }
    double weighted(int64_t t) const
    {
        const int64_t start = t / w * w;
        const double  d = static_cast<double>(w);
        return static_cast<double>(units_in(start - w, start))
            * (d - static_cast<double>(t - start)) / d
            + static_cast<double>(units_in(start, start + w));
    }
    bool fits_in_doubles(int64_t t, int64_t cost) const
    {
        return weighted(t) + static_cast<double>(cost)
            <= static_cast<double>(limit);
    }
    // prev * (w - e) / w + cur + cost <= limit, times w
    bool fits_exactly(int64_t t, int64_t cost) const
    {
        const int64_t  start = t / w * w;
        const __int128 prev = units_in(start - w, start);
        const __int128 cur = units_in(start, start + w);
        return prev * (w - (t - start)) + (cur + cost) * w
            <= static_cast<__int128>(limit) * w;
    }
    // The doubles pass at t, and the exact count is over by less than what
    // 1/1024 us of the previous window's weight is worth.
    bool rounds_to_fit(int64_t t, int64_t cost) const
    {
        const int64_t  start = t / w * w;
        const __int128 prev = units_in(start - w, start);
        const __int128 cur = units_in(start, start + w);
        const __int128 over = prev * (w - (t - start)) + (cur + cost) * w
            - static_cast<__int128>(limit) * w;
        return fits_in_doubles(t, cost) && over > 0 && over * 1024 < prev;
    }
    bool fits(int64_t t, int64_t cost) const
    {
        return fits_exactly(t, cost) && fits_in_doubles(t, cost);
    }
    // The first t in [lo, hi] at which it fits (it does at hi).
    int64_t bisect(int64_t lo, int64_t hi, int64_t cost) const
    {
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (fits(mid, cost)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }

    ThrottleResult hit(int64_t now, int64_t cost)
    {
        const int64_t  start = now / w * w;
        const double   wnow = weighted(now);
        const double   l = static_cast<double>(limit);
        ThrottleResult r;
        r.limit = limit;
        double left = l - wnow;
        if (cost <= limit && fits_in_doubles(now, cost)) {
            left = l - (wnow + static_cast<double>(cost));
            events.push_back({now, cost});
            cumulative.push_back((cumulative.empty() ? 0 : cumulative.back())
                                 + cost);
        } else {
            r.limited = true;
            if (cost <= limit) {
                // Nothing is admitted meanwhile: both predicates are
                // monotonic within a window, and everything has gone two
                // windows on.
                const int64_t last = start + w - 1;
                r.retry_after_us =
                    (fits(last, cost) ? bisect(now, last, cost)
                                      : bisect(start + w, start + 2 * w, cost))
                    - now;
            }
        }
        r.remaining = left <= 0 ? 0 : static_cast<int64_t>(left);
        if (units_in(start, start + w) > 0) {
            r.reset_after_us = start + 2 * w - now;
        } else if (units_in(start - w, start) > 0) {
            r.reset_after_us = start + w - now;
        }
        return r;
    }
};

TEST(SlidingWindow, MatchesReferenceOverRandomTimelines)
{
    RandomTimelines t("sliding_window", 52,
                      {5, 100, 100'000, kMaxSlidingWindowLimit / 2});
    int64_t         rejected = 0;
    int64_t         retries_in_next_window = 0;
    int64_t         rounded_early = 0;
    while (t.next_round()) {
        ReferenceSlidingWindow ref{t.period(), t.limit(), {}, {}};
        Slot                   slot;
        while (t.next_step()) {
            const int64_t        now = t.now();
            const int64_t        cost = t.cost();
            const ThrottleResult want = ref.hit(now, cost);
            const Decision       got = slot.hit(t.policy(), now, cost);
            ASSERT_NO_FATAL_FAILURE(assert_same_result(got.result, want, t));
            if (got.result.retry_after_us != want.retry_after_us) {
                ASSERT_EQ(got.result.retry_after_us, want.retry_after_us - 1)
                    << t.where();
                ASSERT_TRUE(
                    ref.rounds_to_fit(now + got.result.retry_after_us, cost))
                    << t.where();
                rounded_early++;
            }
            ASSERT_EQ(got.store, !want.limited) << t.where();
            rejected += want.limited ? 1 : 0;
            const int64_t start = now / t.period() * t.period();
            retries_in_next_window +=
                now + want.retry_after_us >= start + t.period() ? 1 : 0;
        }
    }
    EXPECT_GT(rejected, t.steps() / 10);
    EXPECT_LT(rejected, t.steps() * 9 / 10);
    EXPECT_GT(retries_in_next_window, rejected / 10);
    EXPECT_LT(retries_in_next_window, rejected * 9 / 10);
    EXPECT_LE(rounded_early, t.steps() / 100'000);
}

} // namespace
} // namespace throttle
