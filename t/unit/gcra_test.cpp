// SPDX-License-Identifier: BSD-2-Clause
// GCRA against redis-cell's reference vectors and, over long random
// timelines, against a literal transcription of CL.THROTTLE kept here.
#include "policy_support.hpp"
#include "throttle/gcra.hpp"
#include "throttle/policy.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kMs = 1000;

Policy
policy(int64_t count, int64_t period_us, int64_t burst)
{
    return make_test_policy("gcra", count, period_us, burst);
}

// One key held the way a zone holds it.
struct Slot {
    StoredSlot slot;

    ThrottleResult hit(const Policy &p, int64_t now, int64_t cost)
    {
        return slot.hit(p, now, cost).result;
    }
};

struct Vector {
    int64_t now_ms, cost;
    bool    limited;
    int64_t remaining, reset_after_ms, retry_after_ms;
};

TEST(Gcra, RedisCellReferenceVectors)
{
    // redis-cell it_rate_limits: burst 4, 1 request per second.
    const Policy p = policy(1, 1'000'000, 4);
    const Vector vectors[] = {
        {0, 6, true, 5, 0, -1},         {0, 1, false, 4, 1000, -1},
        {0, 1, false, 3, 2000, -1},     {0, 1, false, 2, 3000, -1},
        {0, 1, false, 1, 4000, -1},     {0, 1, false, 0, 5000, -1},
        {0, 1, true, 0, 5000, 1000},    {3000, 1, false, 2, 3000, -1},
        {3100, 1, false, 1, 3900, -1},  {4000, 1, false, 1, 4000, -1},
        {8000, 1, false, 4, 1000, -1},  {9500, 1, false, 4, 1000, -1},
        {9500, 0, false, 4, 1000, -1},  {9500, 2, false, 2, 3000, -1},
        {9500, 5, true, 2, 3000, 3000},
    };
    Slot          slot;
    const int64_t start = 1'700'000'000'000'000; // any epoch works
    for (const Vector &v : vectors) {
        SCOPED_TRACE(testing::Message()
                     << "t=" << v.now_ms << "ms cost=" << v.cost);
        ThrottleResult r = slot.hit(p, start + v.now_ms * kMs, v.cost);
        EXPECT_EQ(r.limited, v.limited);
        EXPECT_EQ(r.limit, 5);
        EXPECT_EQ(r.remaining, v.remaining);
        EXPECT_EQ(r.reset_after_us, v.reset_after_ms * kMs);
        EXPECT_EQ(r.retry_after_us,
                  v.retry_after_ms < 0 ? -1 : v.retry_after_ms * kMs);
    }
}

TEST(Gcra, DesignHeaderExample)
{
    // rate=30r/m burst=15: one request leaves 15 and resets in 2 s; the
    // 17th back to back is refused with 2 s to wait.
    const Policy p = policy(30, 60'000'000, 15);
    EXPECT_EQ(p.limit, 16);
    EXPECT_EQ(ceil_seconds(p.window_us), 32);
    Slot           slot;
    ThrottleResult first = slot.hit(p, 0, 1);
    EXPECT_FALSE(first.limited);
    EXPECT_EQ(first.remaining, 15);
    EXPECT_EQ(ceil_seconds(first.reset_after_us), 2);
    for (int i = 1; i < 16; i++) {
        EXPECT_FALSE(slot.hit(p, 0, 1).limited) << i;
    }
    ThrottleResult refused = slot.hit(p, 0, 1);
    EXPECT_TRUE(refused.limited);
    EXPECT_EQ(refused.retry_after_us, 2'000'000);
    EXPECT_EQ(refused.remaining, 0);
}

TEST(Gcra, CostBeyondCapacityNeverFitsAndNeverOverflows)
{
    const Policy p = policy(1, 86'400'000'000, 0); // 1r/d
    Slot         slot;
    for (int64_t cost : {2L, kMaxCost, INT64_MAX}) {
        ThrottleResult r = slot.hit(p, 5, cost);
        EXPECT_TRUE(r.limited);
        EXPECT_EQ(r.retry_after_us, -1);
        EXPECT_EQ(r.remaining, 1);
    }
    EXPECT_FALSE(slot.hit(p, 5, 1).limited);
}

TEST(Gcra, RejectionChangesNothing)
{
    const Policy p = policy(10, 1'000'000, 2);
    Slot         slot;
    for (int i = 0; i < 3; i++) {
        slot.hit(p, 0, 1);
    }
    const StoredKey before = slot.slot.key;
    EXPECT_TRUE(slot.hit(p, 1, 1).limited);
    EXPECT_EQ(slot.slot.key.state.words[0], before.state.words[0]);
    EXPECT_EQ(slot.slot.key.expire_at_us, before.expire_at_us);
}

// CL.THROTTLE as redis-cell's source spells it, over a store with expiry.
struct ReferenceCell {
    int64_t                                    t, dvt, limit;
    std::map<int, std::pair<int64_t, int64_t>> store; // key -> tat, expiry

    ThrottleResult throttle(int key, int64_t now, int64_t quantity)
    {
        int64_t tat = now;
        auto    it = store.find(key);
        if (it != store.end() && now < it->second.second) {
            tat = it->second.first;
        }
        ThrottleResult r;
        r.limit = limit;
        const __int128 increment = static_cast<__int128>(t) * quantity;
        const __int128 new_tat = (now > tat ? now : tat) + increment;
        const __int128 diff = now - (new_tat - dvt);
        int64_t        ttl;
        if (diff < 0) {
            if (increment <= dvt) {
                r.retry_after_us = static_cast<int64_t>(-diff);
            }
            ttl = tat - now;
            r.limited = true;
        } else {
            ttl = static_cast<int64_t>(new_tat) - now;
            store[key] = {static_cast<int64_t>(new_tat),
                          static_cast<int64_t>(new_tat)};
        }
        const int64_t next = dvt - ttl;
        if (next > -t) {
            r.remaining = next / t;
        }
        r.reset_after_us = ttl;
        return r;
    }
};

TEST(Gcra, MatchesReferenceOverRandomTimelines)
{
    std::mt19937_64 rng(20261122);
    for (int round = 0; round < 200; round++) {
        const int64_t count = 1 + static_cast<int64_t>(rng() % 100);
        const int64_t periods[] = {1'000'000, 60'000'000, 3'600'000'000};
        const int64_t period = periods[rng() % 3];
        const int64_t burst = static_cast<int64_t>(rng() % 20);
        const Policy  p = policy(count, period, burst);
        ReferenceCell ref{p.emission_interval_us, p.window_us, p.limit, {}};
        std::map<int, Slot> slots;
        int64_t now = static_cast<int64_t>(rng() % 1'000'000'000'000);
        for (int step = 0; step < 2000; step++) {
            // Mostly small steps (bursts), sometimes long idle gaps.
            now += rng() % 8 == 0
                ? static_cast<int64_t>(rng() % (3 * p.window_us))
                : static_cast<int64_t>(rng() % (p.emission_interval_us + 1));
            const int      key = static_cast<int>(rng() % 4);
            const int64_t  cost = static_cast<int64_t>(rng() % (burst + 3));
            ThrottleResult want = ref.throttle(key, now, cost);
            ThrottleResult got = slots[key].hit(p, now, cost);
            ASSERT_EQ(got.limited, want.limited) << "round " << round;
            ASSERT_EQ(got.remaining, want.remaining) << "round " << round;
            ASSERT_EQ(got.reset_after_us, want.reset_after_us);
            ASSERT_EQ(got.retry_after_us, want.retry_after_us);
        }
    }
}

TEST(Gcra, AdmitsExactlyTheRateOverALongRun)
{
    // Flooding one key for an hour at 10 r/s with burst 5 admits burst + 1
    // at t=0, then one every 100 ms up to and including t=3600 s.
    const Policy p = policy(10, 1'000'000, 5);
    Slot         slot;
    int64_t      admitted = 0;
    for (int64_t now = 0; now <= 3600LL * 1'000'000; now += 5'000) {
        admitted += slot.hit(p, now, 1).limited ? 0 : 1;
    }
    EXPECT_EQ(admitted, 6 + 36'000);
}

} // namespace
} // namespace throttle
