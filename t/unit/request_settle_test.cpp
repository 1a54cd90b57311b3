// SPDX-License-Identifier: BSD-2-Clause
// settle=: which checks of a decided request are charged more (or given
// back) when it ends (throttle::RequestDecision::settle_units()): the
// difference where the zone kept the cost, all of it where
// throttle_on_error let the request go on uncharged, nothing for a request
// refused or turned away.
#include "request_support.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

using namespace request_support;

TEST(Settle, NothingBeforeTheRequestIsDecided)
{
    Request req({&strict_policy()});

    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
    EXPECT_EQ(req.decision.settle_units(0, 5), std::nullopt);
    EXPECT_EQ(req.decision.reserved_units(0), std::nullopt);
    EXPECT_FALSE(req.decision.settles_nothing());
}

TEST(Settle, AChargedZoneIsChargedTheDifference)
{
    Request req({&local_policy(), nullptr, &local_policy()});

    req.checks[2].cost = 4;
    req.pass({passes(7), passes(0), passes(3)});

    EXPECT_EQ(req.decision.settle_units(0, 1), 0); // as reserved
    EXPECT_EQ(req.decision.settle_units(0, 9), 8);
    EXPECT_EQ(req.decision.settle_units(1, 9), std::nullopt); // no key
    EXPECT_EQ(req.decision.settle_units(2, 0), -4);           // all given back
    EXPECT_EQ(req.decision.settle_units(2, 6), 2);
    // throttle_api: what a settle call may give back
    EXPECT_EQ(req.decision.reserved_units(0), 1);
    EXPECT_EQ(req.decision.reserved_units(1), std::nullopt);
    EXPECT_EQ(req.decision.reserved_units(2), 4);
    EXPECT_FALSE(req.decision.settles_nothing());
}

TEST(Settle, ADelayedRequestSettlesAsAPassedOne)
{
    Request req({&local_policy()});

    req.checks[0].delay_units = 0;
    req.pass({passes_full_for(600'000)});

    ASSERT_EQ(req.status(), Status::delayed);
    EXPECT_EQ(req.decision.settle_units(0, 3), 2);
}

TEST(Settle, ARefusedRequestSettlesNothingInAnyZone)
{
    for (bool dry_run : {false, true}) {
        Request req({&local_policy(), &local_policy()},
                    RequestRules{dry_run, false});

        req.pass({passes(5), refuses(100'000)});

        EXPECT_EQ(req.decision.settle_units(0, 3), std::nullopt) << dry_run;
        EXPECT_EQ(req.decision.settle_units(1, 3), std::nullopt) << dry_run;
        EXPECT_EQ(req.decision.reserved_units(0), std::nullopt) << dry_run;
        EXPECT_EQ(req.decision.reserved_units(1), std::nullopt) << dry_run;
        // nor does the other phase's decision, which admitted it
        EXPECT_TRUE(req.decision.settles_nothing()) << dry_run;
    }
}

TEST(Settle, ADryRunThatPassesSettlesAsUsual)
{
    Request req({&local_policy()}, RequestRules{true, false});

    req.pass({passes(5)});

    ASSERT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.decision.settle_units(0, 0), -1);
}

TEST(Settle, StrictAdmittedByRedisIsChargedTheDifference)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({passes(0), passes(6)});
    req.decision.answered(0, passes(2));
    req.decision.redis_done();
    req.pass({passes(0), passes(6)});

    ASSERT_EQ(req.status(), Status::passed);
    EXPECT_EQ(req.decision.settle_units(0, 10), 9);
    EXPECT_EQ(req.decision.settle_units(1, 0), -1);
    EXPECT_EQ(req.decision.reserved_units(0), 1);
    EXPECT_EQ(req.decision.reserved_units(1), 1);
}

TEST(Settle, RedisAdmitsTheLocalZoneRefusesNothingToSettle)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({passes(0), passes(6)});
    req.decision.answered(0, passes(2));
    req.decision.redis_done();
    req.pass({passes(0), refuses(300'000)});

    ASSERT_EQ(req.decision.follow_up(0), FollowUp::refund);
    EXPECT_EQ(req.decision.settle_units(0, 10), std::nullopt);
    EXPECT_EQ(req.decision.settle_units(1, 10), std::nullopt);
}

TEST(Settle, OnErrorAllowTheFailedZoneIsChargedAllOfIt)
{
    Request req({&strict_policy(), &local_policy()});

    req.pass({passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.redis_done();
    req.pass({passes(0), passes(5)});

    ASSERT_EQ(req.status(), Status::error_allowed);
    EXPECT_EQ(req.decision.settle_units(0, 7), 7); // kept nothing
    EXPECT_EQ(req.decision.settle_units(1, 7), 6); // kept its cost
    EXPECT_EQ(req.decision.reserved_units(0), std::nullopt);
    EXPECT_EQ(req.decision.reserved_units(1), 1);
}

TEST(Settle, OnErrorAllowAZoneWithoutRoomIsChargedAllOfIt)
{
    Request req({&local_policy(), &local_policy()});

    req.pass({passes(3), passes(4)}, false);

    ASSERT_EQ(req.status(), Status::error_allowed);
    EXPECT_EQ(req.decision.settle_units(0, 2), 2);
    EXPECT_EQ(req.decision.settle_units(1, 0), 0);
}

TEST(Settle, OnErrorDenyTurnsAwayNothingToSettle)
{
    Request req({&strict_policy(), &local_policy()}, RequestRules{false, true});

    req.pass({passes(0), passes(0)});
    req.decision.failed(0);
    req.decision.redis_done();

    ASSERT_EQ(req.status(), Status::error_denied);
    EXPECT_EQ(req.decision.settle_units(0, 7), std::nullopt);
    EXPECT_EQ(req.decision.settle_units(1, 7), std::nullopt);
}

// throttle_api: a look (cost=0) reserves nothing for a settle call
TEST(Settle, ALookReservesNothing)
{
    Request req({&local_policy()});

    req.checks[0].cost = 0;
    req.pass({passes(7)});

    EXPECT_EQ(req.decision.settle_units(0, 2), 2);
    EXPECT_EQ(req.decision.reserved_units(0), std::nullopt);
}

} // namespace
} // namespace throttle
