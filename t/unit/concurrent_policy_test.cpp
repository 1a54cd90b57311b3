// SPDX-License-Identifier: BSD-2-Clause
// concurrent= zones through their Policy, as the nginx glue reaches them:
// what throttle_zone may say with concurrent=, a key's places taken,
// given back when requests end and renewed while they run, and what a
// strict zone asks Redis and remembers of its answers.
#include "policy_support.hpp"

#include "throttle/concurrent.hpp"
#include "throttle/lua.hpp"

#include <gtest/gtest.h>

#include <string>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kSecondUs = 1'000'000;
constexpr int64_t kLeaseUs = 8 * kSecondUs; // renewed every 2 s
constexpr int64_t kT0 = 1'000 * kLeaseUs;   // on a bucket's start

std::string
refusal(const ZoneParams &params)
{
    Message why;
    auto    p = make_policy(params, why);
    return p ? "" : p.error;
}

ZoneParams
concurrent_params(int64_t limit)
{
    ZoneParams params;
    params.concurrent = limit;
    return params;
}

TEST(ConcurrentPolicy, TakesNoneOfARateZonesParameters)
{
    ZoneParams rate = concurrent_params(3);
    rate.rate = Rate{10, kSecondUs};
    EXPECT_NE(refusal(rate).find("\"rate=\" is for a zone of a rate"),
              std::string::npos);

    ZoneParams burst = concurrent_params(3);
    burst.burst = 0;
    EXPECT_NE(refusal(burst).find("\"burst=\""), std::string::npos);

    ZoneParams algorithm = concurrent_params(3);
    algorithm.algorithm = &default_algorithm();
    EXPECT_NE(refusal(algorithm).find("\"algorithm=\""), std::string::npos);

    ZoneParams log_max = concurrent_params(3);
    log_max.log_max = 10;
    EXPECT_NE(refusal(log_max).find("\"log_max=\""), std::string::npos);

    ZoneParams async = concurrent_params(3);
    async.mode = Mode::async;
    EXPECT_NE(refusal(async).find("cannot \"sync=async\""), std::string::npos);

    ZoneParams lease_alone;
    lease_alone.rate = Rate{10, kSecondUs};
    lease_alone.lease_us = kLeaseUs;
    EXPECT_EQ(refusal(lease_alone), "\"lease=\" needs \"concurrent=\"");

    EXPECT_NE(refusal(concurrent_params(0)), "");
    EXPECT_NE(refusal(concurrent_params(kMaxPlaces + 1)), "");
    ZoneParams short_lease = concurrent_params(3);
    short_lease.lease_us = kMinLeaseUs - 1;
    EXPECT_NE(refusal(short_lease), "");
}

TEST(ConcurrentPolicy, ALinesCostSettleAndDelayAreRefused)
{
    const Policy p = concurrent_policy(3, kLeaseUs);
    Message      why;
    EXPECT_NE(cost_refusal(p, why), nullptr);
    EXPECT_NE(settle_refusal(p, why), nullptr);
    EXPECT_NE(delay_refusal(p, why), nullptr);
    EXPECT_NE(std::string(why.text()).find("concurrent="), std::string::npos);

    const Policy rate = limit_of_5("gcra");
    EXPECT_EQ(cost_refusal(rate, why), nullptr);
    EXPECT_EQ(settle_refusal(rate, why), nullptr);
}

TEST(ConcurrentPolicy, PlacesUntilTheLimitAndOneFreedByAnEnd)
{
    const Policy p = concurrent_policy(3, kLeaseUs);
    StoredSlot   slot;
    for (int64_t left : {2, 1, 0}) {
        Decision d = slot.hit(p, kT0, 1);
        EXPECT_FALSE(d.result.limited);
        EXPECT_EQ(d.result.remaining, left);
        EXPECT_EQ(d.result.limit, 3);
    }
    Decision refused = slot.hit(p, kT0 + 1, 1);
    EXPECT_TRUE(refused.result.limited);
    EXPECT_EQ(refused.result.retry_after_us, kSecondUs);
    EXPECT_EQ(refused.result.reset_after_us, 0);

    // a request taken at kT0 ends: 1 unit reserved, none used
    slot.settle(p, 1, 0, kT0, kT0 + 2);
    Decision again = slot.hit(p, kT0 + 3, 1);
    EXPECT_FALSE(again.result.limited);
    EXPECT_EQ(again.result.remaining, 0);
}

TEST(ConcurrentPolicy, ARenewedPlaceOutlivesItsLeaseAndAnUnrenewedOneEnds)
{
    const Policy p = concurrent_policy(2, kLeaseUs);
    StoredSlot   slot;
    slot.hit(p, kT0, 1); // renewed every quarter lease
    slot.hit(p, kT0, 1); // its worker is gone
    int64_t held_at = kT0;
    for (int64_t t = kT0; t <= kT0 + 3 * kLeaseUs; t += p.renew_interval_us()) {
        held_at = p.renew(slot.key, slot.log.data(), held_at, t);
        ASSERT_EQ(held_at, t);
        const bool dead_one_lives = t < kT0 + kLeaseUs;
        EXPECT_EQ(slot.peek(p, t, 1).result.limited, dead_one_lives) << t;
    }
    // the renewed one still counts: one place free
    EXPECT_EQ(slot.hit(p, kT0 + 3 * kLeaseUs, 1).result.remaining, 0);
    // its end frees it, by the time of its last renewal
    slot.settle(p, 1, 0, held_at, kT0 + 3 * kLeaseUs + 1);
    EXPECT_EQ(slot.peek(p, kT0 + 3 * kLeaseUs + 2, 1).result.remaining, 0);
    EXPECT_FALSE(slot.peek(p, kT0 + 3 * kLeaseUs + 2, 1).result.limited);
}

TEST(ConcurrentPolicy, ARenewalAfterTheLeaseGetsNothing)
{
    const Policy p = concurrent_policy(1, kLeaseUs);
    StoredSlot   slot;
    slot.hit(p, kT0, 1);
    EXPECT_EQ(p.renew(slot.key, slot.log.data(), kT0, kT0 + kLeaseUs), -1);
    EXPECT_FALSE(slot.peek(p, kT0 + kLeaseUs, 1).result.limited);
}

TEST(ConcurrentPolicy, AStrictZoneAsksRedisEveryTime)
{
    const Policy p = concurrent_policy(3, kLeaseUs, Mode::strict);
    EXPECT_EQ(p.log_slots, 0);
    ScriptCall call = p.decision_call(1);
    EXPECT_EQ(call.script, &lua::concurrent_acquire);
    EXPECT_EQ(call.args.n, 2u);
    EXPECT_EQ(call.args.values[0], 3);
    EXPECT_EQ(call.args.values[1], kLeaseUs);

    const int64_t tokens[2] = {kT0, 4};
    ScriptCall    release = p.settle_call(-1, tokens);
    EXPECT_EQ(release.script, &lua::concurrent_release);
    EXPECT_EQ(release.args.values[0], kT0);
    EXPECT_EQ(release.args.values[1], 4);
    ScriptCall renew = p.renew_call(tokens);
    EXPECT_EQ(renew.script, &lua::concurrent_renew);
    EXPECT_EQ(renew.args.n, 3u);
    EXPECT_EQ(renew.args.values[0], kLeaseUs);

    // a rejection is not remembered: a place may free the next moment
    ThrottleResult refused;
    refused.limited = true;
    refused.limit = 3;
    refused.retry_after_us = kSecondUs;
    EXPECT_FALSE(p.remember_answer(nullptr, refused, 1, kT0, kT0).store);
    EXPECT_FALSE(p.decide(nullptr, nullptr, kT0, 1).result.limited);
}

TEST(ConcurrentPolicy, AReloadKeepsPlacesUnlessTheLeaseChanges)
{
    Message why;
    EXPECT_EQ(reload_refusal(concurrent_policy(3, kLeaseUs),
                             concurrent_policy(5, kLeaseUs), why),
              nullptr);
    EXPECT_NE(reload_refusal(concurrent_policy(3, kLeaseUs),
                             concurrent_policy(3, 2 * kLeaseUs), why),
              nullptr);
    EXPECT_NE(reload_refusal(limit_of_5("gcra"), concurrent_policy(3), why),
              nullptr);
}

} // namespace
} // namespace throttle
