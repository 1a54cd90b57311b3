// SPDX-License-Identifier: BSD-2-Clause
// Plans (docs/plans.md): a zone whose rate= or burst= is a variable. Its
// template, the policy each request makes from it, what sizes the zone's
// memory, the per-worker cache of policies, and the async sync of a key at
// its own rate.
#include "throttle/plans.hpp"

#include "policy_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace throttle {
namespace {

using testing_support::algorithm_named;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;

// A zone whose rate= (and burst=, unless `burst` is given) are variables.
Parsed<Policy>
try_template(std::string_view algorithm, Mode mode = Mode::local,
             std::optional<int64_t> burst = std::nullopt,
             std::optional<Rate>    rate = std::nullopt,
             std::optional<int64_t> log_max = std::nullopt)
{
    static Message why; // the tests run one at a time
    ZoneParams     params;
    params.algorithm = &algorithm_named(algorithm);
    params.rate_varies = !rate;
    params.rate = rate.value_or(Rate{0, 0});
    params.burst_varies = !burst;
    params.burst = burst;
    params.mode = mode;
    params.log_max = log_max;
    params.sync_interval_us = mode == Mode::async ? 100'000 : 0;
    return make_policy(params, why);
}

Policy
zone_of_plans(std::string_view algorithm, Mode mode = Mode::local)
{
    return testing_support::plans_zone(algorithm, mode);
}

Policy
plan(const Policy &zone, std::string_view rate, std::string_view burst)
{
    return testing_support::plan_of(zone, rate, burst);
}

std::string
refusal(const Policy &zone, std::string_view rate, std::string_view burst)
{
    Message why;
    auto    p = make_plan(zone, {rate, burst}, why);
    EXPECT_FALSE(p);
    return p ? "" : p.error;
}

TEST(Plans, ARequestsPolicyIsTheZonesWithItsRateAndBurst)
{
    const Policy zone = zone_of_plans("gcra", Mode::strict);
    const Policy pro = plan(zone, "100r/m", "200");

    EXPECT_EQ(pro.rate.count, 100);
    EXPECT_EQ(pro.rate.period_us, kMinute);
    EXPECT_EQ(pro.burst, 200);
    EXPECT_EQ(pro.limit, 201);
    EXPECT_EQ(pro.emission_interval_us, 600'000);
    EXPECT_EQ(pro.window_us, 600'000 * 201);
    EXPECT_EQ(pro.mode, Mode::strict);
    EXPECT_EQ(pro.algorithm, zone.algorithm);
    EXPECT_TRUE(pro.varies());
}

TEST(Plans, AConstantPartStaysTheZones)
{
    auto zone = try_template("fixed_window", Mode::local, 5);
    ASSERT_TRUE(zone) << zone.error;
    EXPECT_FALSE(zone.value->burst_varies);
    // the burst text is not read: the zone's burst= is a constant
    const Policy p = plan(*zone.value, "10r/s", "not read");
    EXPECT_EQ(p.limit, 15);

    zone = try_template("fixed_window", Mode::local, std::nullopt,
                        Rate{10, kSecond});
    ASSERT_TRUE(zone) << zone.error;
    EXPECT_EQ(plan(*zone.value, "", "7").limit, 17);
}

TEST(Plans, ValuesTheStaticFormRefusesAreRefusedWithItsWords)
{
    const Policy zone = zone_of_plans("gcra");

    EXPECT_EQ(refusal(zone, "fast", "1"),
              "rate \"fast\" must look like 30r/m (units: r/s, r/m, r/h, "
              "r/d)");
    EXPECT_EQ(refusal(zone, "0r/s", "1"),
              "rate \"0r/s\" must be greater than zero");
    EXPECT_EQ(refusal(zone, "10r/x", "1"),
              "rate \"10r/x\" has an unknown unit (use r/s, r/m, r/h or r/d)");
    EXPECT_EQ(refusal(zone, "", "1"), "rate \"\" is empty");
    EXPECT_EQ(refusal(zone, "1r/s", ""), "burst \"\" is empty");
    EXPECT_EQ(refusal(zone, "1r/s", "-1"),
              "burst \"-1\" is not a non-negative integer");
    EXPECT_EQ(refusal(zone, "1r/s", "1000000001"),
              "burst \"1000000001\" is too large");
    // what configure() refuses: GCRA's tolerance beyond 2^51 us
    EXPECT_EQ(refusal(zone, "1r/d", "1000000000")
                  .rfind("burst is too large "
                         "for this rate",
                         0),
              0u);
}

TEST(Plans, ASlidingLogLimitAboveLogMaxIsRefused)
{
    auto zone = try_template("sliding_log", Mode::local, std::nullopt,
                             std::nullopt, 100);
    ASSERT_TRUE(zone) << zone.error;
    EXPECT_EQ(plan(*zone.value, "90r/m", "10").limit, 100);
    EXPECT_NE(refusal(*zone.value, "91r/m", "10").find("more than log_max=100"),
              std::string::npos);
}

// nginx -t: a variable is accepted whatever it may give; a constant part
// that no value of the other could make right is refused, as before.
TEST(Plans, TheTemplateRefusesOnlyWhatNoValueCouldMakeRight)
{
    for (const char *name : testing_support::kEveryAlgorithm) {
        EXPECT_TRUE(try_template(name)) << name;
    }
    for (const char *name : {"gcra", "fixed_window", "sliding_window"}) {
        EXPECT_TRUE(try_template(name, Mode::local, kMaxBurst)) << name;
        EXPECT_TRUE(try_template(name, Mode::local, std::nullopt,
                                 Rate{1'000'000'000, 86'400 * kSecond}))
            << name;
    }

    // burst=2000 with any rate keeps more than log_max=1000 timestamps
    auto refused = try_template("sliding_log", Mode::local, 2000);
    ASSERT_FALSE(refused);
    EXPECT_NE(std::string(refused.error)
                  .find("smallest value it may give, "
                        "1r/s"),
              std::string::npos)
        << refused.error;
    // and so does rate=2000r/m with any burst
    EXPECT_FALSE(try_template("sliding_log", Mode::local, std::nullopt,
                              Rate{2000, kMinute}));
}

// What sizes a zone's memory is the same for every request: a local
// sliding_log keeps a ring of log_max entries per key, every plan's slot
// has the zone's words.
TEST(Plans, TheZonesMemoryIsSizedForTheLargestLimit)
{
    auto log_zone = try_template("sliding_log", Mode::local, std::nullopt,
                                 std::nullopt, 50);
    ASSERT_TRUE(log_zone) << log_zone.error;
    EXPECT_EQ(log_zone.value->log_slots, 50);
    const Policy small = plan(*log_zone.value, "3r/s", "0");
    EXPECT_EQ(small.limit, 3);
    EXPECT_EQ(small.log_slots, 50);
    EXPECT_EQ(small.slot_words(), log_zone.value->slot_words());

    EXPECT_EQ(zone_of_plans("sliding_log", Mode::strict).log_slots, 0);

    for (const char *name : testing_support::kEveryAlgorithm) {
        const Policy zone = zone_of_plans(name);
        EXPECT_EQ(plan(zone, "7r/h", "3").slot_words(), zone.slot_words())
            << name;
        // a zone of constants keeps the ring of its limit, as before
        EXPECT_EQ(
            testing_support::make_test_policy(name, 7, kSecond, 3).slot_words(),
            std::string_view(name) == "sliding_log"
                ? zone.slot_words() - zone.log_slots + 10
                : zone.slot_words())
            << name;
    }
}

TEST(Plans, TheCacheMakesEachPlanOnce)
{
    const Policy zone = zone_of_plans("gcra");
    PlanCache    cache;
    Message      why;

    auto free = cache.find(zone, {"10r/m", "2"}, why);
    auto pro = cache.find(zone, {"100r/m", "20"}, why);
    ASSERT_TRUE(free && pro);
    EXPECT_EQ((*free.value)->limit, 3);
    EXPECT_EQ((*pro.value)->limit, 21);
    EXPECT_NE(*free.value, *pro.value);
    // seen before: the same policy, made once
    EXPECT_EQ(*cache.find(zone, {"10r/m", "2"}, why).value, *free.value);
    // the same rate with another burst is another plan
    EXPECT_EQ((*cache.find(zone, {"10r/m", "3"}, why).value)->limit, 4);

    // bad values are refused every time, and take no entry
    EXPECT_FALSE(cache.find(zone, {"fast", "2"}, why));
    EXPECT_EQ(*cache.find(zone, {"10r/m", "2"}, why).value, *free.value);
}

TEST(Plans, TheCacheKeepsTheLatestPlans)
{
    const Policy zone = zone_of_plans("fixed_window");
    PlanCache    cache;
    Message      why;

    for (size_t i = 1; i <= PlanCache::kEntries + 1; i++) {
        const std::string rate = std::to_string(i) + "r/s";
        auto              p = cache.find(zone, {rate, "0"}, why);
        ASSERT_TRUE(p) << p.error;
        EXPECT_EQ((*p.value)->limit, static_cast<int64_t>(i));
    }
    // the first went for the last; each is still right when made again
    for (size_t i = 1; i <= PlanCache::kEntries + 1; i++) {
        const std::string rate = std::to_string(i) + "r/s";
        EXPECT_EQ((*cache.find(zone, {rate, "0"}, why).value)->limit,
                  static_cast<int64_t>(i));
    }

    // a text too long to keep is made each time, rightly
    const std::string long_rate = std::string(30, '0') + "5r/s";
    EXPECT_EQ((*cache.find(zone, {long_rate, "1"}, why).value)->limit, 6);
    EXPECT_EQ((*cache.find(zone, {"2r/s", "0"}, why).value)->limit, 2);
}

// Async mode: each key syncs at its latest request's rate, which its
// record keeps packed; the head of the call says so.
TEST(Plans, AnAsyncKeySyncsAtItsOwnRate)
{
    for (const char *name : {"gcra", "fixed_window", "sliding_window"}) {
        const Policy     zone = zone_of_plans(name, Mode::async);
        const Policy     pro = plan(zone, "100r/m", "20");
        const SyncLayout layout = zone.sync_layout();
        const SyncLayout constant =
            testing_support::limit_of_5(name, Mode::async).sync_layout();
        EXPECT_EQ(layout.key_args, constant.key_args + 1) << name;
        EXPECT_EQ(layout.head_args, constant.head_args) << name;

        int64_t head[2] = {-1, -1};
        zone.sync_head_args(head);
        EXPECT_EQ(head[0], 0) << name; // each key gives its own

        int64_t      args[4] = {};
        const Policy synced = synced_plan(zone, pack_rate(pro.rate));
        synced.sync_key_args({3, 1}, 2, args);
        EXPECT_EQ(args[layout.key_args - 1],
                  std::string_view(name) == "gcra" ? 600'000 : kMinute)
            << name;
        EXPECT_EQ(synced.emission_interval_us, pro.emission_interval_us);
        EXPECT_EQ(synced.window_us,
                  std::string_view(name) == "gcra" ? 600'000 * 1
                                                   : pro.window_us)
            << name; // (a sync needs no burst: GCRA's tolerance is T's)
    }

    // a zone of a constant rate syncs as before
    const Policy constant = testing_support::limit_of_5("gcra", Mode::async);
    int64_t      head[2] = {};
    constant.sync_head_args(head);
    EXPECT_EQ(head[0], constant.emission_interval_us);
    EXPECT_EQ(synced_plan(constant, 0).emission_interval_us,
              constant.emission_interval_us);
}

// Where each key has its own window, Redis answers with its clock: a key's
// place in its window follows from it.
TEST(Plans, AnAsyncWindowKeyFindsItsWindowInRedisClock)
{
    const Policy  zone = zone_of_plans("fixed_window", Mode::async);
    const Policy  per_minute = plan(zone, "10r/m", "0");
    const Policy  per_hour = plan(zone, "100r/h", "0");
    const int64_t hour = 1'699'999'200 * kSecond; // the start of an hour
    const int64_t sent_at = hour + 5 * kMinute + 20 * kSecond;
    const int64_t redis_now[] = {sent_at + 400};
    const int64_t count[] = {7};

    for (const Policy &p : {per_minute, per_hour}) {
        StoredKey key;
        ASSERT_TRUE(p.apply_sync(redis_now, count, sent_at, sent_at + 900, key))
            << p.window_us;
        EXPECT_EQ(key.state.words[0], sent_at - sent_at % p.window_us);
        EXPECT_EQ(key.state.words[1], 7);
        EXPECT_EQ(key.expire_at_us,
                  sent_at - sent_at % p.window_us + p.window_us);
    }
}

TEST(Plans, PackedRatesKeepEveryRate)
{
    const Policy zone = zone_of_plans("gcra", Mode::async);
    for (const char *rate : {"1r/s", "1000000000r/d", "7r/m", "500r/h"}) {
        const Policy p = plan(zone, rate, "0");
        const Policy synced = synced_plan(zone, pack_rate(p.rate));
        EXPECT_EQ(synced.rate.count, p.rate.count) << rate;
        EXPECT_EQ(synced.rate.period_us, p.rate.period_us) << rate;
    }
    // no rate written (never so): the zone's own
    EXPECT_EQ(synced_plan(zone, 0).rate.count, zone.rate.count);
}

TEST(Plans, AnAsyncZoneKeepsItsRateConstantOrVariableOverAReload)
{
    Message      why;
    const Policy constant = testing_support::limit_of_5("gcra", Mode::async);
    const Policy variable = zone_of_plans("gcra", Mode::async);
    EXPECT_NE(reload_refusal(constant, variable, why), nullptr);
    EXPECT_NE(reload_refusal(variable, constant, why), nullptr);
    EXPECT_EQ(reload_refusal(variable, variable, why), nullptr);
    // a burst= of its own, or another mode, changes nothing of the records
    EXPECT_EQ(reload_refusal(testing_support::limit_of_5("gcra"),
                             zone_of_plans("gcra"), why),
              nullptr);
}

TEST(Plans, ALocalLogKeepsItsRingOverAReload)
{
    Message      why;
    const Policy plans = zone_of_plans("sliding_log");
    // a constant limit of 12: a ring of 12; a variable one: of log_max
    const char *refused = reload_refusal(
        testing_support::make_test_policy("sliding_log", 10, kSecond, 2), plans,
        why);
    ASSERT_NE(refused, nullptr);
    EXPECT_NE(std::string(refused).find("from 12 to 1000"), std::string::npos)
        << refused;
    // a constant limit of log_max= had the same ring
    EXPECT_EQ(reload_refusal(testing_support::make_test_policy(
                                 "sliding_log", 1000, kSecond, 0),
                             plans, why),
              nullptr);
}

} // namespace
} // namespace throttle
