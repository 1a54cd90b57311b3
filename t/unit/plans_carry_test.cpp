// SPDX-License-Identifier: BSD-2-Clause
// A key whose plan changes keeps its state (docs/plans.md, "A key that
// changes plans"): each algorithm reads it under the new request's policy.
// Each case here is a row of that table.
#include "throttle/plans.hpp"

#include "policy_support.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

using testing_support::StoredSlot;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;
// the start of an hour of the wall clock (the window algorithms' windows
// are aligned on it), and a time ten seconds into its first minute
constexpr int64_t kHour = 1'699'999'200 * kSecond;
constexpr int64_t kT0 = kHour + 10 * kSecond;

// Two plans of a zone of `algorithm`: a key goes from one to the other.
struct TwoPlans {
    Policy zone;
    Policy free;
    Policy pro;
};

TwoPlans
two_plans(std::string_view algorithm, PlanTexts free, PlanTexts pro,
          std::optional<int64_t> log_max = std::nullopt)
{
    const Policy zone =
        testing_support::plans_zone(algorithm, Mode::local, log_max);
    return {zone, testing_support::plan_of(zone, free.rate, free.burst),
            testing_support::plan_of(zone, pro.rate, pro.burst)};
}

// Admits `n` requests of one unit at `now`, all of which must pass.
void
spend(StoredSlot &slot, const Policy &p, int64_t now, int n)
{
    for (int i = 0; i < n; i++) {
        ASSERT_FALSE(slot.hit(p, now, 1).result.limited) << i;
    }
}

// GCRA: the TAT stays; the new plan's T and tolerance apply from then on.
// The time the old plan's requests still take counts against the new
// tolerance: an upgrade mid-burst waits until the TAT is within it.
TEST(PlanCarryOver, GcraKeepsTheTat)
{
    // free: T 6 s, tolerance 18 s; pro: T 0.6 s, tolerance 12.6 s
    const auto [zone, free, pro] =
        two_plans("gcra", {"10r/m", "2"}, {"100r/m", "20"});
    StoredSlot key;

    spend(key, free, kT0, 3);
    EXPECT_EQ(key.key.state.words[0], kT0 + 18 * kSecond);
    EXPECT_TRUE(key.hit(free, kT0, 1).result.limited);

    // the TAT is 18 s ahead, more than pro's 12.6 s: 6 s to wait
    Decision d = key.hit(pro, kT0, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 6 * kSecond);
    EXPECT_EQ(d.result.limit, 21);
    EXPECT_EQ(d.result.remaining, 0);
    // then one every 0.6 s, pro's pace
    spend(key, pro, kT0 + 6 * kSecond, 1);
    EXPECT_TRUE(key.hit(pro, kT0 + 6 * kSecond, 1).result.limited);
    spend(key, pro, kT0 + 6'600'000, 1);
    // and once drained, pro's whole burst
    spend(key, pro, kT0 + kMinute, 21);

    // a downgrade: pro's 21 units (12.6 s) count against free's 18 s
    StoredSlot other;
    spend(other, pro, kT0, 21);
    d = other.hit(free, kT0, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 600'000); // 12.6 + 6 - 18 s
    spend(other, free, kT0 + 600'000, 1);
}

// fixed_window: the window's count stays and is compared with the new
// limit.
TEST(PlanCarryOver, FixedWindowKeepsTheCount)
{
    const auto [zone, free, pro] =
        two_plans("fixed_window", {"10r/m", "0"}, {"100r/m", "0"});
    StoredSlot key;

    spend(key, free, kT0, 10);
    EXPECT_TRUE(key.hit(free, kT0, 1).result.limited);
    // an upgrade: 90 more in this minute
    Decision d = key.peek(pro, kT0, 1);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 89);
    spend(key, pro, kT0, 90);
    EXPECT_TRUE(key.hit(pro, kT0, 1).result.limited);
    // a downgrade: 100 counted, free's 10 long spent, until the minute ends
    d = key.hit(free, kT0 + kSecond, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(d.result.retry_after_us, kMinute - 11 * kSecond);
    spend(key, free, kHour + kMinute, 10);
}

// A window of another length: the count carries over only where the key's
// window starts where one of the new plan's does (a minute's first as an
// hour's); otherwise it is no window of the new plan, and the key starts
// afresh in the new plan's window.
TEST(PlanCarryOver, AWindowOfAnotherLengthCarriesOnlyWhereItStarts)
{
    for (const char *name : {"fixed_window", "sliding_window"}) {
        const auto [zone, per_minute, per_hour] =
            two_plans(name, {"10r/m", "0"}, {"20r/h", "0"});

        // the hour's first minute: its 10 count in the hour too
        StoredSlot aligned;
        spend(aligned, per_minute, kT0, 10);
        Decision d = aligned.peek(per_hour, kT0, 1);
        EXPECT_FALSE(d.result.limited) << name;
        EXPECT_EQ(d.result.remaining, 9) << name;

        // a minute within the hour: another window, a fresh count
        StoredSlot inside;
        spend(inside, per_minute, kT0 + 5 * kMinute, 10);
        EXPECT_EQ(inside.peek(per_hour, kT0 + 5 * kMinute, 1).result.remaining,
                  19)
            << name;
    }
}

// sliding_window: both counts stay, weighed as the new window weighs them.
TEST(PlanCarryOver, SlidingWindowKeepsItsCounts)
{
    const auto [zone, free, pro] =
        two_plans("sliding_window", {"10r/m", "0"}, {"40r/m", "0"});
    StoredSlot key;

    spend(key, free, kT0, 10);
    // the next minute, half-way: 10 × 1/2 weigh of the previous one
    const int64_t later = kHour + kMinute + 30 * kSecond;
    EXPECT_EQ(key.peek(free, later, 1).result.remaining, 4);
    EXPECT_EQ(key.peek(pro, later, 1).result.remaining, 34);
    spend(key, pro, later, 35);
    EXPECT_TRUE(key.hit(pro, later, 1).result.limited);
    EXPECT_TRUE(key.hit(free, later, 1).result.limited);
}

// sliding_log: the timestamps stay, compared with the new limit and
// window; the ring holds log_max of them whatever the plan.
TEST(PlanCarryOver, SlidingLogKeepsItsTimestamps)
{
    const auto [zone, free, pro] =
        two_plans("sliding_log", {"5r/m", "0"}, {"50r/m", "0"}, 60);
    StoredSlot key;

    spend(key, free, kT0, 5);
    EXPECT_TRUE(key.hit(free, kT0, 1).result.limited);
    spend(key, pro, kT0 + kSecond, 45);
    EXPECT_TRUE(key.hit(pro, kT0 + kSecond, 1).result.limited);

    // a downgrade: 50 in the window, 5 allowed; the request fits once
    // 46 have left, the 46th oldest at kT0 + 1 s
    Decision d = key.hit(free, kT0 + 2 * kSecond, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(d.result.retry_after_us, kMinute - kSecond);

    // a shorter window: the same timestamps leave sooner
    const Policy per_second = testing_support::plan_of(zone, "5r/s", "0");
    EXPECT_TRUE(key.peek(per_second, kT0 + 1'500'000, 1).result.limited);
    spend(key, per_second, kT0 + 2 * kSecond, 5);
}

// A strict GCRA zone's memory is a lower bound of Redis's TAT, whatever
// the plan: rejected from it under a plan means Redis rejects under it.
TEST(PlanCarryOver, StrictGcraMemoryHoldsForEveryPlan)
{
    const Policy zone = testing_support::plans_zone("gcra", Mode::strict);
    const Policy free = testing_support::plan_of(zone, "10r/m", "2");
    const Policy pro = testing_support::plan_of(zone, "100r/m", "20");

    // Redis admitted free's third: its TAT is 18 s ahead
    ThrottleResult admitted;
    admitted.limit = 3;
    admitted.reset_after_us = 18 * kSecond;
    const Decision memory =
        free.remember_answer(nullptr, admitted, 1, kT0, kT0);
    ASSERT_TRUE(memory.store);

    // pro's tolerance is 12.6 s: rejected from memory, as Redis would
    StoredKey key;
    key.state = memory.state;
    key.expire_at_us = memory.expire_at_us;
    Decision d = pro.decide(&key, nullptr, kT0, 1);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, 6 * kSecond);
    // after 6 s Redis decides
    EXPECT_FALSE(
        pro.decide(&key, nullptr, kT0 + 6 * kSecond, 1).result.limited);
}

} // namespace
} // namespace throttle
