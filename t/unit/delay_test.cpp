// SPDX-License-Identifier: BSD-2-Clause
// delay=: how long an admitted request waits. Vectors worked out by hand
// for bursts, delays and costs, then long random timelines against a
// transcription of nginx's limit_req (its excess, in thousandths of a
// request, and its delay), kept here.
#include "policy_support.hpp"
#include "throttle/gcra.hpp"
#include "throttle/policy.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kMs = 1000;
constexpr int64_t kSecond = 1'000'000;

// A request of a timeline: when, at what cost, and what it should get: the
// wait, or -1 for a rejection.
struct Step {
    int64_t at_ms, cost, wait_ms;
};

// Runs `steps` through one key of a zone (as the glue does: decide, commit
// if admitted) with a line of delay=`delay`.
void
expect_waits(const Policy &p, int64_t delay, std::initializer_list<Step> steps)
{
    StoredSlot    slot;
    const int64_t start = 1'700'000'000'000'000;
    for (const Step &s : steps) {
        SCOPED_TRACE(testing::Message()
                     << "t=" << s.at_ms << "ms cost=" << s.cost);
        const Decision d = slot.hit(p, start + s.at_ms * kMs, s.cost);
        EXPECT_EQ(d.result.limited, s.wait_ms < 0);
        EXPECT_EQ(p.delay_us(d.result, s.cost, delay),
                  s.wait_ms < 0 ? 0 : s.wait_ms * kMs);
    }
}

TEST(Delay, ABurstGoesDelayPlusOneAtOnceThenOneEveryT)
{
    // 10r/s (T = 100 ms) burst=5 delay=2: six of eight pass, the first
    // three at once, the next ones 100 ms apart
    const Policy p = make_test_policy("gcra", 10, kSecond, 5);
    expect_waits(p, 2,
                 {{0, 1, 0},
                  {0, 1, 0},
                  {0, 1, 0},
                  {0, 1, 100},
                  {0, 1, 200},
                  {0, 1, 300},
                  {0, 1, -1},
                  {0, 1, -1}});
}

TEST(Delay, ZeroSpacesEveryRequestButTheFirst)
{
    // 10r/s burst=3 delay=0: each request waits until the one before it
    // has had its T; a request that comes late enough waits less
    const Policy p = make_test_policy("gcra", 10, kSecond, 3);
    expect_waits(p, 0,
                 {{0, 1, 0},
                  {0, 1, 100},
                  {50, 1, 150},   // TAT 300: ahead of it 250 - 100
                  {250, 1, 50},   // TAT 400: 150 ahead, less T
                  {600, 1, 0},    // drained at 400
                  {610, 1, 90},   // TAT 800
                  {610, 1, 190},  // TAT 900
                  {610, 1, 290},  // TAT 1000: the last that fits DVT 400
                  {610, 1, -1}}); // TAT 1100 > 610 + DVT
}

TEST(Delay, ACostWaitsForTheUnitsAheadOfIt)
{
    // 10r/s burst=5 delay=1 cost=2: a request goes at once while at most 1
    // unit is ahead of it
    const Policy p = make_test_policy("gcra", 10, kSecond, 5);
    expect_waits(p, 1,
                 {{0, 2, 0},       // TAT 200, nothing ahead
                  {0, 2, 100},     // TAT 400, 2 units ahead: one T
                  {0, 2, 300},     // TAT 600
                  {0, 2, -1},      // TAT 800 > DVT 600
                  {0, 0, 500},     // cost 0: the 6 units ahead, less 1
                  {300, 1, 200}}); // TAT 700: 3 ahead, less 1
}

TEST(Delay, ADelayOfBurstOrMoreNeverWaits)
{
    const Policy p = make_test_policy("gcra", 10, kSecond, 4);
    for (int64_t delay : {int64_t{4}, int64_t{5}, kMaxDelay, kNoDelay}) {
        SCOPED_TRACE(delay);
        expect_waits(p, delay,
                     {{0, 1, 0},
                      {0, 1, 0},
                      {0, 1, 0},
                      {0, 1, 0},
                      {0, 1, 0},
                      {0, 1, -1}});
    }
}

TEST(Delay, TheLargestValuesDoNotOverflow)
{
    // 1r/d: T = 86400 s; (delay + cost) * T would overflow
    const int64_t t = 86'400 * kSecond;
    EXPECT_EQ(gcra_delay_us(t, 5 * t, kMaxCost, kMaxDelay), 0);
    EXPECT_EQ(gcra_delay_us(t, kMaxToleranceUs, 1, kNoDelay), 0);
    EXPECT_EQ(gcra_delay_us(t, INT64_MAX, 1, 0), INT64_MAX - t);
    EXPECT_EQ(gcra_delay_us(t, INT64_MIN, 1, 0), 0);
    EXPECT_EQ(gcra_delay_us(1, kMaxToleranceUs, 0, 0), kMaxToleranceUs);
}

TEST(Delay, RedisAnswersWaitAsTheZoneDecides)
{
    // a strict zone's answer is Redis's: an admission's reset_after is
    // new_tat - now there too
    const Policy strict =
        make_test_policy("gcra", 10, kSecond, 5, Mode::strict);
    ThrottleResult answer;
    answer.limit = 6;
    answer.remaining = 1;
    answer.reset_after_us = 500 * kMs;
    EXPECT_EQ(strict.delay_us(answer, 1, 2), 200 * kMs);
    answer.limited = true;
    answer.retry_after_us = 100 * kMs;
    EXPECT_EQ(strict.delay_us(answer, 1, 2), 0);
}

const char *const kWindowAlgorithms[] = {"fixed_window", "sliding_window",
                                         "sliding_log"};

TEST(Delay, OnlyGcraCanDelay)
{
    Message why;
    EXPECT_EQ(delay_refusal(make_test_policy("gcra", 10, kSecond, 5), why),
              nullptr);
    for (const char *name : kWindowAlgorithms) {
        const Policy p = make_test_policy(name, 10, kSecond, 5);
        const char  *refusal = delay_refusal(p, why);
        ASSERT_NE(refusal, nullptr) << name;
        EXPECT_EQ(std::string(refusal),
                  "has \"algorithm=" + std::string(name)
                      + "\", which cannot space requests out: it admits a "
                        "window's count at any time in the window, with no "
                        "time at which a request would conform; \"delay=\" "
                        "needs \"algorithm=gcra\"");
        // and were it asked, nothing would wait
        StoredSlot slot;
        slot.hit(p, 1'700'000'000'000'000, 1);
        const Decision d = slot.hit(p, 1'700'000'000'000'000, 1);
        EXPECT_EQ(p.delay_us(d.result, 1, 0), 0) << name;
    }
}

// nginx's limit_req for one key, as ngx_http_limit_req_lookup() and
// ngx_http_limit_req_account() compute it: the excess is in thousandths
// of a request, time in milliseconds, the rate in thousandths of a request
// per second.
struct LimitReq {
    int64_t rate, burst, delay;
    bool    held = false;
    int64_t excess = 0, last = 0;

    // The delay in ms, or -1 for a rejection.
    int64_t hit(int64_t now)
    {
        int64_t e = 0;
        if (held) {
            const int64_t ms = now - last;
            e = std::max<int64_t>(excess - rate * ms / 1000 + 1000, 0);
            if (e > burst) {
                return -1;
            }
            if (ms != 0) {
                last = now;
            }
        } else {
            held = true;
            last = now;
        }
        excess = e;
        return e <= delay ? 0 : (e - delay) * 1000 / rate;
    }
};

TEST(Delay, AsLimitReqOnRandomTimelines)
{
    // rates whose T is a whole number of ms, so that limit_req's integer
    // arithmetic is exact
    const int64_t rates[] = {1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 200, 1000};
    std::mt19937_64 rng(20240601);
    int64_t         delayed = 0, rejected = 0;

    for (int run = 0; run < 400; run++) {
        const int64_t rate = rates[rng() % std::size(rates)];
        const int64_t burst = static_cast<int64_t>(rng() % 12);
        const int64_t delay = static_cast<int64_t>(rng() % (burst + 3));
        const int64_t t_ms = 1000 / rate;
        const Policy  p = make_test_policy("gcra", rate, kSecond, burst);
        LimitReq      reference{rate * 1000, burst * 1000, delay * 1000};
        StoredSlot    slot;
        int64_t       now_ms = static_cast<int64_t>(rng() % 1'000'000);

        for (int i = 0; i < 300; i++) {
            // mostly bursts, sometimes a pause of up to a few T
            if (rng() % 4 == 0) {
                now_ms += static_cast<int64_t>(rng() % (4 * t_ms + 1));
            }
            SCOPED_TRACE(testing::Message()
                         << "rate=" << rate << "r/s burst=" << burst
                         << " delay=" << delay << " request " << i);
            const int64_t  want = reference.hit(now_ms);
            const Decision d = slot.hit(p, now_ms * kMs, 1);
            ASSERT_EQ(d.result.limited, want < 0);
            if (want >= 0) {
                ASSERT_EQ(p.delay_us(d.result, 1, delay), want * kMs);
            }
            delayed += want > 0;
            rejected += want < 0;
        }
    }
    // the timelines did reach both rules
    EXPECT_GT(delayed, 1000);
    EXPECT_GT(rejected, 1000);
}

} // namespace
} // namespace throttle
