// SPDX-License-Identifier: BSD-2-Clause
// concurrent=, local zones (concurrent.hpp): places up to the limit, a
// request's end frees its place, a renewal keeps it, and a dead worker's
// places (never renewed) end within one lease; then random requests,
// ends, renewals and deaths against a model that keeps each place's lease
// end.
#include "throttle/concurrent.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace throttle {
namespace {

constexpr int64_t kSecond = 1'000'000;
// a whole number of days since the epoch: a bucket starts on it
constexpr int64_t    kEpoch = 1'700'006'400 * kSecond;
constexpr PlaceRules kThreeFor60s{3, 60 * kSecond};

struct Key {
    int64_t buckets[kLeaseBuckets] = {};
};

TEST(Concurrent, PlacesUpToTheLimitThenNone)
{
    Key key;
    for (int64_t left : {2, 1, 0}) {
        const PlaceTaken p = take_place(kThreeFor60s, key.buckets, kEpoch);
        EXPECT_TRUE(p.admitted);
        EXPECT_EQ(p.places_left, left);
        EXPECT_EQ(p.bucket, kEpoch / (15 * kSecond));
    }
    EXPECT_FALSE(take_place(kThreeFor60s, key.buckets, kEpoch).admitted);
    EXPECT_EQ(places_held(kThreeFor60s, key.buckets, kEpoch), 3);
}

TEST(Concurrent, AnEndFreesItsPlaceOnce)
{
    Key              key;
    const PlaceTaken a = take_place(kThreeFor60s, key.buckets, kEpoch);
    take_place(kThreeFor60s, key.buckets, kEpoch);
    take_place(kThreeFor60s, key.buckets, kEpoch);

    free_place(kThreeFor60s, key.buckets, a.bucket, kEpoch + kSecond);
    EXPECT_EQ(places_held(kThreeFor60s, key.buckets, kEpoch + kSecond), 2);
    EXPECT_TRUE(
        take_place(kThreeFor60s, key.buckets, kEpoch + kSecond).admitted);
    // a request not admitted frees nothing
    free_place(kThreeFor60s, key.buckets, -1, kEpoch + kSecond);
    EXPECT_EQ(places_held(kThreeFor60s, key.buckets, kEpoch + kSecond), 3);
}

TEST(Concurrent, ADeadWorkersPlacesEndWithinOneLease)
{
    Key key;
    // taken 10 s into a bucket: they live until the bucket's start plus
    // the lease, 50 s on
    const int64_t at = kEpoch + 10 * kSecond;
    for (int i = 0; i < 3; i++) {
        take_place(kThreeFor60s, key.buckets, at);
    }
    EXPECT_FALSE(
        take_place(kThreeFor60s, key.buckets, at + 50 * kSecond - 1).admitted);
    EXPECT_EQ(places_held(kThreeFor60s, key.buckets, at + 50 * kSecond), 0);
    EXPECT_TRUE(
        take_place(kThreeFor60s, key.buckets, at + 50 * kSecond).admitted);
}

TEST(Concurrent, ARenewalEveryQuarterLeaseKeepsThePlace)
{
    Key        key;
    PlaceTaken p = take_place(PlaceRules{1, 60 * kSecond}, key.buckets, kEpoch);
    int64_t    bucket = p.bucket;
    // a 10-minute stream, renewed every 15 s
    for (int64_t t = 15 * kSecond; t <= 600 * kSecond; t += 15 * kSecond) {
        bucket = renew_place(PlaceRules{1, 60 * kSecond}, key.buckets, bucket,
                             kEpoch + t);
        ASSERT_GE(bucket, 0) << t;
        EXPECT_FALSE(
            take_place(PlaceRules{1, 60 * kSecond}, key.buckets, kEpoch + t)
                .admitted);
    }
    free_place(PlaceRules{1, 60 * kSecond}, key.buckets, bucket,
               kEpoch + 600 * kSecond);
    EXPECT_TRUE(take_place(PlaceRules{1, 60 * kSecond}, key.buckets,
                           kEpoch + 600 * kSecond)
                    .admitted);
}

TEST(Concurrent, ARenewalTooLateGetsNoPlaceBack)
{
    Key              key;
    const PlaceRules one{1, 60 * kSecond};
    const PlaceTaken p = take_place(one, key.buckets, kEpoch);
    EXPECT_EQ(renew_place(one, key.buckets, p.bucket, kEpoch + 60 * kSecond),
              -1);
    const PlaceTaken q = take_place(one, key.buckets, kEpoch + 60 * kSecond);
    EXPECT_TRUE(q.admitted);
    // the first request ends: the second keeps its place
    free_place(one, key.buckets, p.bucket, kEpoch + 61 * kSecond);
    EXPECT_EQ(places_held(one, key.buckets, kEpoch + 61 * kSecond), 1);
}

// Random requests of one key across workers that renew every quarter
// lease (with some jitter) and now and then die: the key holds exactly
// the places the model's live requests hold, and admits exactly when the
// model has one free.
TEST(Concurrent, RandomRequestsAndDeathsAgainstAModel)
{
    struct Request {
        int     worker;
        int64_t bucket;
        int64_t ends_us; // the model: its bucket's start plus the lease
    };
    std::mt19937_64      rng(20261127);
    const PlaceRules     rules{4, 4 * kSecond};
    const int64_t        b = rules.bucket_us();
    Key                  key;
    std::vector<Request> flying;
    // workers 0 to 2 live; a request of a worker that died is worker 3's:
    // nothing renews or ends it any more
    const std::vector<bool> dead = {false, false, false, true};
    int64_t                 now = kEpoch;
    int64_t                 next_renewal = now + b;
    int64_t                 admitted = 0, refused = 0, died = 0;

    for (int step = 0; step < 20000; step++) {
        now += static_cast<int64_t>(rng() % (b / 8));
        if (now >= next_renewal) {
            for (Request &r : flying) {
                if (dead[static_cast<size_t>(r.worker)]) {
                    continue;
                }
                r.bucket = renew_place(rules, key.buckets, r.bucket, now);
                ASSERT_GE(r.bucket, 0) << "a live request lost its place";
                r.ends_us = r.bucket * b + rules.lease_us;
            }
            next_renewal = now + b - static_cast<int64_t>(rng() % (b / 8));
        }
        // the model: places of ended leases are gone
        flying.erase(
            std::remove_if(flying.begin(), flying.end(),
                           [&](const Request &r) { return r.ends_us <= now; }),
            flying.end());
        ASSERT_EQ(places_held(rules, key.buckets, now),
                  static_cast<int64_t>(flying.size()))
            << "step " << step;

        const uint64_t what = rng() % 10;
        if (what < 5) {
            const int        worker = static_cast<int>(rng() % 3);
            const PlaceTaken p = take_place(rules, key.buckets, now);
            ASSERT_EQ(p.admitted,
                      static_cast<int64_t>(flying.size()) < rules.limit);
            if (p.admitted) {
                flying.push_back(
                    {worker, p.bucket, p.bucket * b + rules.lease_us});
                admitted++;
            } else {
                refused++;
            }
        } else if (what < 9 && !flying.empty()) {
            const size_t i = rng() % flying.size();
            if (!dead[static_cast<size_t>(flying[i].worker)]) {
                free_place(rules, key.buckets, flying[i].bucket, now);
                flying.erase(flying.begin() + static_cast<long>(i));
            }
        } else if (rng() % 50 == 0) {
            // a worker dies; the master starts another in its place
            const int w = static_cast<int>(rng() % 3);
            for (Request &r : flying) {
                if (r.worker == w) {
                    r.worker = 3;
                }
            }
            died++;
        }
    }
    EXPECT_GT(admitted, 1000);
    EXPECT_GT(refused, 1000);
    EXPECT_GT(died, 2);
}

} // namespace
} // namespace throttle
