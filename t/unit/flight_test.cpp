// SPDX-License-Identifier: BSD-2-Clause
// One flight per key (issue 27): while a strict key's decision script is
// in flight from an nginx, its requests that would take the last unit the
// zone knows of wait for the answer (Policy::flight_wait_us()), and are
// decided again from the memory it leaves (RequestDecision's flight
// stage): rejected where it proves Redis would, else one goes next.
#include "request_support.hpp"
#include "throttle/table.hpp"

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
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + 800; // the answer is in: one RTT later

    // no flight now; the memory proves the next unit is a T away
    Decision d = p.decide(&key, nullptr, now, 1);
    ASSERT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, kSentAt + kT - now);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(p.flight_wait_us(flight, d, now), 0);
}

TEST(Flight, WhenTheBoundPassesOneRequestFliesAndTheOthersWait)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT; // the next unit may fit

    Decision first = p.decide(&key, nullptr, now, 1);
    ASSERT_FALSE(first.result.limited); // ask Redis
    EXPECT_EQ(first.result.remaining, 0);
    EXPECT_EQ(p.flight_wait_us(flight, first, now), 0); // no flight: it goes

    flight = p.take_flight(flight, now + kTimeout);

    Decision second = p.decide(&key, nullptr, now + 100, 1);
    ASSERT_FALSE(second.result.limited);
    EXPECT_EQ(p.flight_wait_us(flight, second, now + 100), kTimeout - 100);

    // the flight's admission lands: the waiter is rejected from it
    ThrottleResult admitted{false, 11, 0, kDvt, -1};
    Decision learned = p.remember_answer(&key, admitted, 1, now, now + 700);
    p.commit(learned, now + 700, 1, key, nullptr);
    flight = p.land_flight(flight, now + kTimeout, false);

    Decision again = p.decide(&key, nullptr, now + 1000, 1);
    EXPECT_TRUE(again.result.limited);
    EXPECT_EQ(again.result.retry_after_us, kT - 1000);
    EXPECT_EQ(p.flight_wait_us(flight, again, now + 1000), 0);
}

TEST(Flight, ARequestWithRoomInTheMemoryNeverWaits)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + 3 * kT; // room for 2 more by the memory

    Decision d = p.decide(&key, nullptr, now, 1);
    ASSERT_FALSE(d.result.limited);
    EXPECT_GT(d.result.remaining, 0);
    flight = p.take_flight(flight, now + kTimeout);
    EXPECT_EQ(p.flight_wait_us(flight, d, now), 0);
}

TEST(Flight, AKeyTheZoneKnowsNothingOfWaitsOnlyIfItWouldTakeItsLastUnit)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    Decision      d = p.decide(nullptr, nullptr, kSentAt, 1);

    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(p.flight_wait_us(flight, d, kSentAt), 0);

    // a node whose memory has lapsed: the zone knows nothing either, and
    // a fresh key's burst leaves room for more than this request
    StoredKey key = after_last_unit();
    int64_t   later = kSentAt + 10 * kSecond;
    flight = p.take_flight(flight, later + kTimeout);
    d = p.decide(&key, nullptr, later, 1);
    EXPECT_EQ(d.result.remaining, p.limit - 1);
    EXPECT_EQ(p.flight_wait_us(flight, d, later), 0);

    // burst=0: a fresh key has room for one request, so the others wait
    // for its flight (a key flooded at once)
    static const Policy single =
        make_test_policy("gcra", 50, kSecond, 0, Mode::strict);
    d = single.decide(nullptr, nullptr, later, 1);
    ASSERT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.remaining, 0);
    EXPECT_EQ(single.flight_wait_us(flight, d, later), kTimeout);
}

TEST(Flight, AFlightThatTimedOutIsNoLongerWaitedFor)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT;

    flight = p.take_flight(flight, now + kTimeout);
    Decision d = p.decide(&key, nullptr, now + kTimeout, 1);
    EXPECT_EQ(p.flight_wait_us(flight, d, now + kTimeout), 0);
}

TEST(Flight, OnlyItsOwnFlightLands)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT;

    flight = p.take_flight(flight, now + kTimeout);
    flight = p.take_flight(flight,
                           now + 10 + kTimeout); // one sent after it timed out
    flight = p.take_flight(flight, now + kTimeout); // keeps the later
    flight =
        p.land_flight(flight, now + kTimeout, false); // the older one lands
    Decision d = p.decide(&key, nullptr, now + 20, 1);
    EXPECT_EQ(p.flight_wait_us(flight, d, now + 20), kTimeout - 10);

    flight = p.land_flight(flight, now + 10 + kTimeout, false);
    EXPECT_EQ(p.flight_wait_us(flight, d, now + 20), 0);
}

TEST(Flight, AFailedFlightLeavesAMarkThatNoRequestWaitsFor)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = flooded_policy();
    StoredKey     key = after_last_unit();
    int64_t       now = kSentAt + kT;

    flight = p.take_flight(flight, now + kTimeout);
    flight = p.land_flight(flight, now + kTimeout, true);
    EXPECT_TRUE(Policy::flight_failed(flight, now + kTimeout));
    Decision d = p.decide(&key, nullptr, now + kTimeout, 1);
    EXPECT_EQ(p.flight_wait_us(flight, d, now + kTimeout), 0);

    // the next request to Redis takes the flight over the mark
    flight = p.take_flight(flight, now + 20 + kTimeout);
    EXPECT_FALSE(Policy::flight_failed(flight, now + 20));
    // and if no answer lands in its time, it failed too
    EXPECT_TRUE(Policy::flight_failed(flight, now + 20 + kTimeout));
    d = p.decide(&key, nullptr, now + 20, 1);
    EXPECT_EQ(p.flight_wait_us(flight, d, now + 20), kTimeout);
}

TEST(Flight, LocalAndAsyncZonesHaveNoFlights)
{
    int64_t       flight = 0; // the key\'s FlightEntry\'s
    const Policy &p = local_policy();
    StoredKey     key;
    flight = p.take_flight(flight, kSentAt + kTimeout);
    EXPECT_EQ(flight, 0);
    Decision d = p.decide(&key, nullptr, kSentAt, 11);
    EXPECT_EQ(p.flight_wait_us(flight, d, kSentAt), 0);
}

TEST(Flight, AnEntryIsItsKeysOnlyWhileNoOtherTookIt)
{
    FlightEntry  entries[16] = {};
    const size_t n = 16;
    uint64_t     tag = 0x1234, other = tag + n; // the same entry

    FlightEntry &e = entries[flight_index(tag, n)];
    EXPECT_EQ(&entries[flight_index(other, n)], &e);
    EXPECT_EQ(flight_of(e, tag), 0);
    e = {tag, kSentAt + kTimeout};
    EXPECT_EQ(flight_of(e, tag), kSentAt + kTimeout);
    EXPECT_EQ(flight_of(e, other), 0); // no flight: it goes to Redis
    e = {other, kSentAt + 1};
    EXPECT_EQ(flight_of(e, tag), 0); // lost: its requests go, too
}

TEST(Flight, AZoneHasAFlightEntryPer256thOfItsBytesUpTo1024)
{
    EXPECT_EQ(flight_entries(4u << 20), 1024u);
    EXPECT_EQ(flight_entries(64u << 20), 1024u);
    EXPECT_EQ(flight_entries(1u << 20), 256u);
    EXPECT_EQ(flight_entries(8u << 12), 16u);
    EXPECT_EQ(flight_entries(0), 16u);
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

TEST(FlightStage, ARequestWhoseFlightFailedFailsWithoutAScriptOfItsOwn)
{
    Flooded req;

    req.flight(kTimeout);
    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::flight);
    req.decision.retry(kTimeout);
    req.flight(0);
    req.checks[0].flight_failed = true; // no answer came in time
    req.pass({passes(0)});
    ASSERT_EQ(req.decision.stage(), RequestDecision::Stage::zones_after_redis);
    req.pass({passes(0)}); // the other zones, as after Redis failed

    EXPECT_EQ(req.status(), Status::error_allowed);
    EXPECT_FALSE(req.decision.asks_redis(0));
    EXPECT_FALSE(req.checks[0].charged);
}

TEST(FlightStage, ARequestThatDidNotWaitAsksRedisDespiteAFailedFlight)
{
    Flooded req;

    req.checks[0].flight_failed = true; // an earlier request's flight
    req.pass({passes(0)});
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
