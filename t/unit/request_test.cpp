// SPDX-License-Identifier: BSD-2-Clause
// The decision about one request over its zones (throttle::RequestDecision):
// which zone binds, charged to none when one refuses, Redis's part and the
// refunds, dry run and throttle_on_error, delays, each zone's own verdict,
// and the answer across phases. Cases by hand, then random requests
// against a model written from the rules as docs/modes.md states them.
#include "request_support.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;
using namespace request_support;

TEST(RequestDecision, NoKeyNoDecision)
{
    Request req({nullptr, nullptr});

    EXPECT_EQ(req.decision.stage(), RequestDecision::Stage::decided);
    EXPECT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.binding(), -1);
}

TEST(RequestDecision, LocalZonesPassChargedAllTheFewestRemainingBinds)
{
    Request req({&local_policy(), nullptr, &local_policy()});

    EXPECT_TRUE(req.decision.takes_part(0));
    EXPECT_FALSE(req.decision.takes_part(1));
    req.pass({passes(7), passes(0), passes(3)});

    EXPECT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.binding(), 2);
    EXPECT_EQ(req.decision.outcome().result.remaining, 3);
    EXPECT_TRUE(req.checks[0].charged);
    EXPECT_FALSE(req.checks[1].charged);
    EXPECT_TRUE(req.checks[2].charged);
}

TEST(RequestDecision, OneRefusesChargedToNoneTheLongestWaitBinds)
{
    Request req({&local_policy(), &local_policy(), &local_policy()});

    req.pass({refuses(200'000), passes(5), refuses(900'000)});

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_TRUE(turns_away(req.status()));
    EXPECT_EQ(req.binding(), 2);
    for (const ZoneCheck &c : req.checks) {
        EXPECT_FALSE(c.charged);
    }
    EXPECT_EQ(req.decision.verdict(0), Status::rejected);
    EXPECT_EQ(req.decision.verdict(1), Status::passed);
    EXPECT_EQ(req.decision.verdict(2), Status::rejected);
}

TEST(RequestDecision, ACostThatNeverFitsBindsBeforeAnyWait)
{
    Request req({&local_policy(), &local_policy()});

    req.pass({refuses(3'600 * kSecond), refuses(-1)});

    EXPECT_EQ(req.binding(), 1);
}

TEST(RequestDecision, DryRunSaysWhatItWouldHaveDone)
{
    Request req({&local_policy()}, RequestRules{true, true});

    req.pass({refuses(100'000)});

    EXPECT_EQ(req.status(), Status::rejected_dry_run);
    EXPECT_FALSE(turns_away(req.status()));
    EXPECT_EQ(req.decision.verdict(0), Status::rejected_dry_run);
}

TEST(RequestDecision, AZoneWithoutRoomFailsTheRequestByOnError)
{
    for (bool deny : {false, true}) {
        for (bool dry_run : {false, true}) {
            Request req({&local_policy(), &local_policy()},
                        RequestRules{dry_run, deny});

            req.pass({passes(3), passes(4)}, false);

            Status want =
                deny && !dry_run ? Status::error_denied : Status::error_allowed;
            EXPECT_EQ(req.status(), want) << deny << dry_run;
            EXPECT_EQ(req.binding(), -1);
            EXPECT_FALSE(req.checks[0].charged);
            EXPECT_EQ(req.decision.verdict(0), want);
        }
    }
}

TEST(RequestDecision, ACheckThatCannotBeMadeDecidesByOnError)
{
    Request req({&local_policy(), nullptr}, RequestRules{false, true});

    req.decision.cannot_decide();

    EXPECT_EQ(req.status(), Status::error_denied);
    EXPECT_EQ(req.decision.verdict(0), Status::error_denied);
    EXPECT_FALSE(req.checks[0].charged);
}

TEST(RequestDecision, StrictAndLocalRedisFirstThenTheLocalZoneIsCharged)
{
    Request req({&strict_policy(), &local_policy()});

    EXPECT_TRUE(req.decision.takes_part(0)); // its memory of rejections
    req.pass({passes(0), passes(6)});
    EXPECT_FALSE(req.checks[1].charged); // not before Redis says yes
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
    EXPECT_TRUE(req.decision.asks_redis(0));
    EXPECT_FALSE(req.decision.asks_redis(1));

    req.decision.answered(0, passes(2));
    req.decision.redis_done();
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::zones_after_redis);
    EXPECT_FALSE(req.decision.takes_part(0));
    EXPECT_TRUE(req.decision.takes_part(1));
    req.pass({passes(0), passes(6)});

    EXPECT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.binding(), 0);
    EXPECT_TRUE(req.checks[0].charged);
    EXPECT_TRUE(req.checks[1].charged);
    EXPECT_EQ(req.decision.follow_up(0), FollowUp::remember);
    EXPECT_EQ(req.decision.follow_up(1), FollowUp::none);
}

TEST(RequestDecision, RedisAdmitsTheLocalZoneRefusesRedisGivesItBack)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({passes(0), passes(0)});
    req.decision.answered(0, passes(2));
    req.decision.redis_done();
    req.pass({passes(0), refuses(300'000)});

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_EQ(req.binding(), 1);
    EXPECT_FALSE(req.checks[0].charged);
    EXPECT_FALSE(req.checks[1].charged);
    EXPECT_EQ(req.decision.follow_up(0), FollowUp::refund);
    EXPECT_EQ(req.decision.verdict(0), Status::passed);
}

TEST(RequestDecision, AFreeRequestHasNothingToGiveBack)
{
    Request req({&strict_policy(), &local_policy()});
    req.checks[0].cost = 0;

    req.pass({passes(0), passes(0)});
    req.decision.answered(0, passes(2));
    req.decision.redis_done();
    req.pass({passes(0), refuses(300'000)});

    EXPECT_EQ(req.decision.follow_up(0), FollowUp::none);
}

TEST(RequestDecision, RedisRefusesTheLocalZonesDoNotDecideAgain)
{
    Request req({&strict_policy(), &strict_policy(), &local_policy()});

    req.pass({passes(0), passes(0), passes(4)});
    req.decision.answered(0, refuses(500'000));
    req.decision.answered(1, passes(8));
    req.decision.redis_done();

    EXPECT_EQ(req.decision.stage(), RequestDecision::Stage::decided);
    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_EQ(req.binding(), 0);
    EXPECT_EQ(req.decision.follow_up(0), FollowUp::remember);
    EXPECT_EQ(req.decision.follow_up(1), FollowUp::refund);
    EXPECT_FALSE(req.checks[2].charged);
}

TEST(RequestDecision, ADeniedKeyIsRefusedFromMemoryWithoutRedis)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({refuses(400'000), passes(3)});

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_TRUE(req.decision.denied_from_memory(0));
    EXPECT_FALSE(req.decision.denied_from_memory(1));
    EXPECT_EQ(req.decision.follow_up(0), FollowUp::none);
}

TEST(RequestDecision, RedisFailsOnErrorAllowTheOtherZonesStillDecide)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.redis_done();
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::zones_after_redis);
    req.pass({passes(0), passes(5)});

    EXPECT_EQ(req.status(), Status::error_allowed);
    EXPECT_EQ(req.binding(), -1);
    EXPECT_TRUE(req.checks[1].charged);
    EXPECT_EQ(req.decision.verdict(0), Status::error_allowed);
    EXPECT_EQ(req.decision.verdict(1), Status::error_allowed);
}

TEST(RequestDecision, RedisFailsOnErrorDenyRefusedAndTheOthersRefunded)
{
    Request req({&strict_policy(), &strict_policy(), &local_policy()},
                RequestRules{false, true});

    req.pass({passes(0), passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.answered(1, passes(4));
    req.decision.redis_done();

    EXPECT_EQ(req.status(), Status::error_denied);
    EXPECT_TRUE(turns_away(req.status()));
    EXPECT_EQ(req.decision.follow_up(1), FollowUp::refund);
    EXPECT_FALSE(req.checks[2].charged);
}

TEST(RequestDecision, RedisFailsInADryRunDenyIsNotApplied)
{
    Request req({&strict_policy(), &local_policy()}, RequestRules{true, true});

    req.pass({passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.redis_done();
    req.pass({passes(0), passes(5)});

    EXPECT_EQ(req.status(), Status::error_allowed);
}

TEST(RequestDecision, ARefusalOutranksAnotherZonesFailure)
{
    Request req({&strict_policy(), &strict_policy()},
                RequestRules{false, true});

    req.pass({passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.answered(1, refuses(200'000));
    req.decision.redis_done();

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_EQ(req.binding(), 1);
    EXPECT_EQ(req.decision.verdict(0), Status::error_denied);
    EXPECT_EQ(req.decision.verdict(1), Status::rejected);
}

TEST(RequestDecision, TheLongestWaitDelaysInWholeMilliseconds)
{
    Request req({&local_policy(), &local_policy()});
    req.checks[0].delay_units = 2;
    req.checks[1].delay_units = 2;

    req.pass({passes_full_for(650'000), passes_full_for(800'500)});

    EXPECT_EQ(req.status(), Status::delayed);
    EXPECT_EQ(req.checks[0].wait_us, 350'000);
    EXPECT_EQ(req.checks[1].wait_us, 500'500);
    EXPECT_EQ(req.decision.outcome().longest, 1);
    EXPECT_EQ(req.decision.outcome().delay_ms, 501);
    EXPECT_EQ(req.decision.verdict(0), Status::delayed);
}

TEST(RequestDecision, NoLineWithDelayNoWait)
{
    Request req({&local_policy()}, RequestRules{true, false});

    req.pass({passes_full_for(800'000)});

    EXPECT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.decision.outcome().delay_ms, 0);
}

TEST(RequestDecision, InADryRunTheDelayIsWhatItWouldHaveBeen)
{
    Request req({&local_policy()}, RequestRules{true, false});
    req.checks[0].delay_units = 0;

    req.pass({passes_full_for(450'000)});

    EXPECT_EQ(req.status(), Status::delayed_dry_run);
    EXPECT_EQ(req.decision.outcome().delay_ms, 350);
}

TEST(RequestDecision, ARefusedRequestIsNotDelayed)
{
    Request req({&local_policy(), &local_policy()});
    req.checks[0].delay_units = 0;

    req.pass({passes_full_for(900'000), refuses(100'000)});

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_EQ(req.decision.outcome().longest, -1);
    EXPECT_EQ(req.decision.outcome().delay_ms, 0);
    // but the zone's own verdict says it would have held it back
    EXPECT_EQ(req.decision.verdict(0), Status::delayed);
}

TEST(Statuses, NamesAndLabelsAgree)
{
    for (const StatusInfo &s : kStatuses) {
        std::string upper;
        for (char c : s.label) {
            upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
        }
        EXPECT_EQ(upper, s.name);
    }
}

TEST(Answers, TheOneThatSaysMoreAcrossPhases)
{
    // from the most said to the least
    const Status order[] = {
        Status::rejected,      Status::error_denied, Status::rejected_dry_run,
        Status::error_allowed, Status::delayed,      Status::delayed_dry_run,
        Status::passed};
    const ThrottleResult r = passes(3);

    for (size_t i = 0; i < std::size(order); i++) {
        for (size_t j = 0; j < std::size(order); j++) {
            EXPECT_EQ(answers_before({order[i], &r}, {order[j], &r}), i < j)
                << status_info(order[i]).name << " vs "
                << status_info(order[j]).name;
        }
    }
}

TEST(Answers, BetweenEqualsTheBindingZoneDecides)
{
    const ThrottleResult few = passes(1), many = passes(9);

    EXPECT_TRUE(
        answers_before({Status::passed, &few}, {Status::passed, &many}));
    EXPECT_FALSE(
        answers_before({Status::passed, &many}, {Status::passed, &few}));
    EXPECT_TRUE(
        answers_before({Status::passed, &many}, {Status::passed, nullptr}));
    EXPECT_FALSE(
        answers_before({Status::passed, nullptr}, {Status::passed, &many}));
}

// --- random requests against the rules, stated plainly

struct ModelCheck {
    bool    present, strict;
    bool    refuses_first; // the zone (or a strict zone's memory) refuses
    int     redis;         // strict: 0 admits, 1 refuses, 2 fails
    bool    refuses_after; // a local zone, deciding again after Redis
    int64_t cost;
};

struct ModelOutcome {
    Status                status;
    std::vector<bool>     charged;
    std::vector<FollowUp> settlements;
};

ModelOutcome
model(const std::vector<ModelCheck> &cs, RequestRules rules, bool room)
{
    size_t       n = cs.size();
    ModelOutcome m{Status::passed, std::vector<bool>(n, false),
                   std::vector<FollowUp>(n, FollowUp::none)};
    bool         any = false, strict = false, first = false;
    bool         redis_refuses = false, redis_fails = false, after = false;
    const Status refused =
        rules.dry_run ? Status::rejected_dry_run : Status::rejected;

    for (const ModelCheck &c : cs) {
        any = any || c.present;
        strict = strict || (c.present && c.strict);
        first = first || (c.present && c.refuses_first);
        if (c.present && c.strict) {
            redis_refuses = redis_refuses || c.redis == 1;
            redis_fails = redis_fails || c.redis == 2;
        }
        after = after || (c.present && !c.strict && c.refuses_after);
    }

    if (!any) {
        return m;
    }
    // every zone decides from what it holds; one refusal is enough
    if (first) {
        m.status = refused;
        return m;
    }
    // local zones alone: charged together, or all fail with no room
    if (!strict) {
        if (!room) {
            m.status = on_error_status(rules);
            return m;
        }
        for (size_t i = 0; i < n; i++) {
            m.charged[i] = cs[i].present;
        }
        return m;
    }
    // Redis decides the strict zones; then the others decide again, and
    // are charged if they agree (and have room)
    bool locals = false;
    for (const ModelCheck &c : cs) {
        locals = locals || (c.present && !c.strict);
    }
    bool other_zones = !redis_refuses
        && !(redis_fails && on_error_status(rules) == Status::error_denied);
    bool no_room = other_zones && !after && locals && !room;
    bool admitted = other_zones && !after && !no_room;
    for (size_t i = 0; i < n; i++) {
        const ModelCheck &c = cs[i];
        if (!c.present) {
            continue;
        }
        if (c.strict && c.redis != 2) {
            m.charged[i] = admitted;
            m.settlements[i] = c.redis == 1 || admitted ? FollowUp::remember
                : c.cost > 0                            ? FollowUp::refund
                                                        : FollowUp::none;
        } else if (!c.strict) {
            m.charged[i] = admitted;
        }
    }
    if (redis_refuses || (other_zones && after)) {
        m.status = refused;
    } else if (redis_fails || no_room) {
        m.status = on_error_status(rules);
    }
    return m;
}

TEST(RequestDecision, RandomRequestsFollowTheRules)
{
    std::mt19937 rng(20261126);
    auto         coin = [&](int in) { return rng() % in == 0; };

    for (int round = 0; round < 20000; round++) {
        std::vector<ModelCheck> cs(1 + rng() % 4);
        RequestRules            rules{coin(3), coin(2)};
        bool                    room = !coin(8);

        for (ModelCheck &c : cs) {
            c = ModelCheck{!coin(6),       coin(2), coin(4),
                           int(rng() % 3), coin(4), int64_t(rng() % 3)};
        }

        Request req({}, rules);
        for (const ModelCheck &c : cs) {
            ZoneCheck z;
            z.policy = c.present
                ? (c.strict ? &strict_policy() : &local_policy())
                : nullptr;
            z.cost = c.cost;
            req.checks.push_back(z);
        }
        req.decision.begin(rules, req.checks.data(), req.checks.size());

        auto first = [&](const ModelCheck &c) {
            return c.refuses_first ? refuses(100'000) : passes(5);
        };
        auto stage_results = [&](auto result_of) {
            for (size_t i = 0; i < cs.size(); i++) {
                if (req.decision.takes_part(i)) {
                    req.checks[i].decision.result = result_of(cs[i]);
                }
            }
        };

        if (req.decision.stage() == RequestDecision::Stage::zones) {
            stage_results(first);
            // Redis is asked only when no zone refused: room matters
            // only where zones are charged
            req.decision.end_pass(req.decision.charges() ? room : true);
        }
        if (req.decision.stage() == RequestDecision::Stage::redis) {
            for (size_t i = 0; i < cs.size(); i++) {
                if (!req.decision.asks_redis(i)) {
                    continue;
                }
                if (cs[i].redis == 2) {
                    req.decision.failed(i);
                } else {
                    req.decision.answered(
                        i, cs[i].redis == 1 ? refuses(200'000) : passes(2));
                }
            }
            req.decision.redis_done();
        }
        if (req.decision.stage() == RequestDecision::Stage::zones_after_redis) {
            stage_results([&](const ModelCheck &c) {
                return c.refuses_after ? refuses(100'000) : passes(5);
            });
            req.decision.end_pass(req.decision.charges() ? room : true);
        }
        ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::decided);

        // room only matters to a charge: the model charges where the
        // decision does
        ModelOutcome want = model(cs, rules, room);
        SCOPED_TRACE(testing::Message() << "round " << round);
        EXPECT_EQ(req.status(), want.status);
        for (size_t i = 0; i < cs.size(); i++) {
            EXPECT_EQ(req.checks[i].charged, want.charged[i]) << "check " << i;
            EXPECT_EQ(req.decision.follow_up(i), want.settlements[i])
                << "check " << i;
        }
    }
}

} // namespace
} // namespace throttle
