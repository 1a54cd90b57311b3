// SPDX-License-Identifier: BSD-2-Clause
// One flight per key (issue 27): while a strict key's decision script is
// in flight from an nginx, its requests that would take the last unit the
// zone knows of wait for the answer (Policy::flight_wait_us()), and are
// decided again from the memory it leaves (RequestDecision's flight
// stage): rejected where it proves Redis would, else one goes next.
#include "request_support.hpp"

#include <gtest/gtest.h>

using namespace throttle;
using namespace throttle::request_support;

namespace {

// The flooded key of issue 27: 50r/s burst=10, T = 20 ms, DVT = 220 ms.
constexpr int64_t kT = 20'000;
constexpr int64_t kDvt = 11 * kT;
constexpr int64_t kTimeout = 50'000; // the backend's
constexpr int64_t kSentAt = 1'000'000'000;

const Policy &
flooded_policy()
{
    static const Policy p =
        make_test_policy("gcra", 50, kSecond, 10, Mode::strict);
    return p;
}

// What the zone holds after Redis admitted the key's last unit for a
// command sent at kSentAt (remaining 0, the TAT a DVT ahead).
StoredKey
after_last_unit()
{
    const Policy  &p = flooded_policy();
    StoredKey      key;
    ThrottleResult admitted{false, 11, 0, kDvt, -1};
    Decision       d =
        p.remember_answer(nullptr, admitted, 1, kSentAt, kSentAt + 500);
    EXPECT_TRUE(d.store);
    p.commit(d, kSentAt + 500, 1, key, nullptr);
    return key;
}

} // namespace

TEST(Flight, AWaitingRequestIsRejectedFromTheFlightsAdmission)
{
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + 800; // the answer is in: one RTT later

    // no flight now; the memory proves the next unit is a T away
    Decision d = p.decide(&key, nullptr, now, 1);
    ASSERT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, kSentAt + kT - now);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(p.flight_wait_us(&key, d, now), 0);
}

TEST(Flight, WhenTheBoundPassesOneRequestFliesAndTheOthersWait)
{
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT; // the next unit may fit

    Decision first = p.decide(&key, nullptr, now, 1);
    ASSERT_FALSE(first.result.limited); // ask Redis
    EXPECT_EQ(first.result.remaining, 0);
    EXPECT_EQ(p.flight_wait_us(&key, first, now), 0); // no flight: it goes

    p.take_flight(key, now + kTimeout);

    Decision second = p.decide(&key, nullptr, now + 100, 1);
    ASSERT_FALSE(second.result.limited);
    EXPECT_EQ(p.flight_wait_us(&key, second, now + 100), kTimeout - 100);

    // the flight's admission lands: the waiter is rejected from it
    ThrottleResult admitted{false, 11, 0, kDvt, -1};
    Decision learned = p.remember_answer(&key, admitted, 1, now, now + 700);
    p.commit(learned, now + 700, 1, key, nullptr);
    p.land_flight(key, now + kTimeout);

    Decision again = p.decide(&key, nullptr, now + 1000, 1);
    EXPECT_TRUE(again.result.limited);
    EXPECT_EQ(again.result.retry_after_us, kT - 1000);
    EXPECT_EQ(p.flight_wait_us(&key, again, now + 1000), 0);
}

TEST(Flight, ARequestWithRoomInTheMemoryNeverWaits)
{
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + 3 * kT; // room for 2 more by the memory

    Decision d = p.decide(&key, nullptr, now, 1);
    ASSERT_FALSE(d.result.limited);
    EXPECT_GT(d.result.remaining, 0);
    p.take_flight(key, now + kTimeout);
    EXPECT_EQ(p.flight_wait_us(&key, d, now), 0);
}

TEST(Flight, AKeyTheZoneKnowsNothingOfNeverWaits)
{
    const Policy &p = flooded_policy();
    Decision      d = p.decide(nullptr, nullptr, kSentAt, 1);

    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(p.flight_wait_us(nullptr, d, kSentAt), 0);

    // a node whose memory has lapsed: the zone knows nothing either
    StoredKey key = after_last_unit();
    int64_t   later = kSentAt + 10 * kSecond;
    p.take_flight(key, later + kTimeout);
    d = p.decide(&key, nullptr, later, 1);
    EXPECT_EQ(d.result.remaining, p.limit);
    EXPECT_EQ(p.flight_wait_us(&key, d, later), 0);
}

TEST(Flight, AFlightThatTimedOutIsNoLongerWaitedFor)
{
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT;

    p.take_flight(key, now + kTimeout);
    Decision d = p.decide(&key, nullptr, now + kTimeout, 1);
    EXPECT_EQ(p.flight_wait_us(&key, d, now + kTimeout), 0);
}

TEST(Flight, OnlyItsOwnFlightLands)
{
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT;

    p.take_flight(key, now + kTimeout);
    p.take_flight(key, now + 10 + kTimeout); // one sent after it timed out
    p.take_flight(key, now + kTimeout);      // keeps the later
    p.land_flight(key, now + kTimeout);      // the older one lands
    Decision d = p.decide(&key, nullptr, now + 20, 1);
    EXPECT_EQ(p.flight_wait_us(&key, d, now + 20), kTimeout - 10);

    p.land_flight(key, now + 10 + kTimeout);
    EXPECT_EQ(p.flight_wait_us(&key, d, now + 20), 0);
}

TEST(Flight, LocalAndAsyncZonesHaveNoFlights)
{
    const Policy &p = local_policy();
    StoredKey     key;
    p.take_flight(key, kSentAt + kTimeout);
    Decision d = p.decide(&key, nullptr, kSentAt, 11);
    EXPECT_EQ(p.flight_wait_us(&key, d, kSentAt), 0);
}

namespace {

// A request of one strict zone whose key has a flight, waiting at most
// `budget_us` in all.
struct Flooded : Request {
    explicit Flooded(int64_t budget_us = kTimeout) : Request({&strict_policy()})
    {
        checks[0].flight_budget_us = budget_us;
    }

    void flight(int64_t wait_us) { checks[0].flight_wait_us = wait_us; }
};

} // namespace

TEST(FlightStage, ARequestWaitsForTheFlightThenAsksRedis)
{
    Flooded req;

    req.flight(kTimeout);
    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::flight);
    EXPECT_FALSE(req.decision.asks_redis(0));
    EXPECT_FALSE(req.checks[0].charged);
    EXPECT_EQ(req.decision.flight_poll_us(), 1000);

    req.decision.retry(1000);
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::zones);
    EXPECT_TRUE(req.decision.takes_part(0));
    req.flight(0); // landed, and the memory lets it go
    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
    EXPECT_TRUE(req.decision.asks_redis(0));
}

TEST(FlightStage, TheFlightsAnswerRejectsTheWaiterFromMemory)
{
    Flooded req;

    req.flight(kTimeout);
    req.pass({passes(0)});
    req.decision.retry(800);
    req.flight(0);
    req.pass({refuses(19'200)});

    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_TRUE(req.decision.denied_from_memory(0));
    EXPECT_EQ(req.decision.follow_up(0), FollowUp::none);
    EXPECT_EQ(req.decision.outcome().result.retry_after_us, 19'200);
}

TEST(FlightStage, NoRequestWaitsLongerThanItsRedissTimeout)
{
    Flooded req(kTimeout);

    req.flight(kTimeout);
    req.pass({passes(0)});
    req.decision.retry(kTimeout - 300);
    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::flight);
    EXPECT_EQ(req.decision.flight_poll_us(), 300); // not past the timeout

    req.decision.retry(kTimeout);
    req.pass({passes(0)}); // a flight again: it waits no more
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
    EXPECT_TRUE(req.decision.asks_redis(0));
}

TEST(FlightStage, TheSmallestTimeoutOfTheRequestsZonesBoundsItsWait)
{
    Request req({&strict_policy(), &strict_policy()});
    req.checks[0].flight_budget_us = kTimeout;
    req.checks[1].flight_budget_us = 2000;
    req.checks[0].flight_wait_us = kTimeout;

    req.pass({passes(0), passes(3)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::flight);
    req.decision.retry(2000);
    req.pass({passes(0), passes(3)});
    EXPECT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
}

TEST(FlightStage, ARejectionByAnyZoneNeedsNoWait)
{
    Request req({&strict_policy(), &local_policy()});
    req.checks[0].flight_budget_us = kTimeout;
    req.checks[0].flight_wait_us = kTimeout;

    req.pass({passes(0), refuses(5000)});
    EXPECT_EQ(req.status(), Status::rejected);
    EXPECT_EQ(req.binding(), 1);
}

TEST(FlightStage, WithoutABudgetNoRequestWaits)
{
    Flooded req(0);

    req.flight(kTimeout);
    req.pass({passes(0)});
    EXPECT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
}

TEST(FlightStage, ALocalZoneIsChargedOnlyAfterRedis)
{
    Request req({&strict_policy(), &local_policy()});
    req.checks[0].flight_budget_us = kTimeout;
    req.checks[0].flight_wait_us = kTimeout;

    req.pass({passes(0), passes(6)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::flight);
    EXPECT_FALSE(req.checks[1].charged);
    req.decision.retry(1000);
    req.checks[0].flight_wait_us = 0;
    req.pass({passes(0), passes(6)});
    EXPECT_EQ(req.decision.stage(), RequestDecision::Stage::redis);
    EXPECT_FALSE(req.checks[1].charged);
}
