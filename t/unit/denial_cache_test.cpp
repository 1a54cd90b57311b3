// SPDX-License-Identifier: BSD-2-Clause
// A strict zone's answers against Redis's: over random timelines, every
// request a zone rejects from its memory of Redis's answers (the denial
// cache) is one Redis would reject at that moment, with the fields Redis
// would give. One node alone, refunds included, gets Redis's very answer;
// nodes that share a key learn only their own answers, so a cached one
// can be early (retry, reset) and generous (remaining) by what the others
// had admitted since, never more.
#include "redis_fixture.hpp"

#include "throttle/policy.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

// A node's view of one key: what its zone holds (a strict zone's memory).
struct Node {
    bool      held = false;
    StoredKey key;
    int64_t   cost = 1; // of its last request
};

struct Tally {
    int64_t cached = 0;  // rejections answered from a memory
    int64_t asked = 0;   // decisions Redis made
    int64_t refunds = 0; // charges given back
};

class DenialCacheAgainstRedis : public RedisScripts {
  protected:
    // `nodes` nodes share each policy's key; `refunds`: whether an
    // admitted charge is sometimes given back (another zone refused it).
    Tally timelines(std::string_view algorithm, int nodes, bool refunds,
                    uint64_t seed);

    // Redis's answer at `now`, the key then held far out (see held_pttl()).
    static std::vector<Reply> ask(const Policy &p, const std::string &key,
                                  int64_t now, int64_t cost)
    {
        return pipeline({decision(p, key, now, cost), held_pttl(key)});
    }
};

// What a cached answer may differ by from Redis's: nothing on one node;
// across nodes, only towards "sooner, more left".
void
expect_cached_answer(const ThrottleResult &cached, const ThrottleResult &redis,
                     bool alone, const std::string &where)
{
    ASSERT_TRUE(redis.limited)
        << where << ": the zone rejected what Redis admits: " << str(cached)
        << " against " << str(redis);
    if (alone) {
        ASSERT_TRUE(same(cached, redis))
            << where << "\n  cached: " << str(cached)
            << "\n  redis:  " << str(redis);
        return;
    }
    ASSERT_EQ(cached.limit, redis.limit) << where;
    ASSERT_GE(cached.remaining, redis.remaining) << where;
    ASSERT_LE(cached.reset_after_us, redis.reset_after_us) << where;
    if (redis.retry_after_us < 0) {
        ASSERT_EQ(cached.retry_after_us, -1) << where;
    } else {
        ASSERT_GE(cached.retry_after_us, 0) << where;
        ASSERT_LE(cached.retry_after_us, redis.retry_after_us) << where;
    }
}

Tally
DenialCacheAgainstRedis::timelines(std::string_view algorithm, int nodes,
                                   bool refunds, uint64_t seed)
{
    constexpr int kPolicies = 40;
    constexpr int kSteps = 300;

    std::mt19937_64 rng(seed);
    Tally           tally;
    for (int pi = 0; pi < kPolicies; pi++) {
        const Policy      p = random_policy(rng, algorithm, Mode::strict);
        const int64_t     w = p.rate.period_us;
        const std::string key = "d:" + std::string(algorithm) + ":"
            + std::to_string(nodes) + ":" + std::to_string(pi);
        std::vector<Node> view(static_cast<size_t>(nodes));
        int64_t           now = realtime_now_us();

        bool gone = false; // the key, on Redis's clock
        for (int step = 0; step < kSteps; step++) {
            if (gone) {
                // Redis has no state for the key: no node may answer from
                // what it had
                for (Node &n : view) {
                    n.held = false;
                }
            }
            // steps within a round trip's reach of each other, and far
            now = next_now(rng, now, uniform(rng, 0, 3) == 0 ? w : w / 100 + 1);
            Node &node = view[uniform(rng, 0, nodes - 1)];
            // a client that insists, most of the time: what the cache is for
            if (uniform(rng, 0, 3) == 0) {
                node.cost = random_cost(rng, p.limit);
            }
            const int64_t    cost = node.cost;
            const StoredKey *held = node.held ? &node.key : nullptr;

            std::ostringstream where;
            where << str(p) << " seed=" << seed << " policy#" << pi << " step#"
                  << step << " now=" << now << " cost=" << cost;

            const Decision cached = p.decide(held, nullptr, now, cost);
            const std::vector<Reply> replies = ask(p, key, now, cost);
            const ScriptReply        redis = p.read_decision(replies[0].get());
            EXPECT_TRUE(redis.ok) << where.str() << ": " << redis.message;
            if (!redis.ok) {
                return tally;
            }
            gone = gone_on_redis_clock(integer(replies[1].get()),
                                       redis.result.reset_after_us);

            if (cached.result.limited) {
                // Redis rejects it too, so asking changed nothing
                expect_cached_answer(cached.result, redis.result, nodes == 1,
                                     where.str());
                if (testing::Test::HasFatalFailure()) {
                    return tally;
                }
                tally.cached++;
                continue;
            }
            tally.asked++;

            if (refunds && !redis.result.limited && cost > 0
                && uniform(rng, 0, 4) == 0) {
                pipeline({evalsha(p.refund_call(cost, redis.tokens), key),
                          held_pttl(key)});
                tally.refunds++;
                continue;
            }

            const Decision keep =
                p.remember_answer(held, redis.result, cost, now, now);
            if (keep.store) {
                node.held = true;
                p.commit(keep, now, cost, node.key, nullptr);
            }
        }
    }
    std::cout << "[          ] " << algorithm << " x" << nodes
              << " node(s): " << tally.cached << " answered from the cache, "
              << tally.asked << " by Redis, " << tally.refunds << " refunds\n";
    return tally;
}

const char *const kAlgorithms[] = {"gcra", "fixed_window", "sliding_window",
                                   "sliding_log"};

TEST_F(DenialCacheAgainstRedis, OneNodeAnswersAsRedisWould)
{
    uint64_t seed = 1;
    for (const char *algorithm : kAlgorithms) {
        const Tally t = timelines(algorithm, 1, true, seed++);
        if (HasFatalFailure()) {
            return;
        }
        // the cache did answer, and Redis did too
        EXPECT_GT(t.cached, 100) << algorithm;
        EXPECT_GT(t.asked, 100) << algorithm;
        EXPECT_GT(t.refunds, 10) << algorithm;
    }
}

TEST_F(DenialCacheAgainstRedis, NodesSharingAKeyAreSoonerAtWorst)
{
    uint64_t seed = 100;
    for (const char *algorithm : kAlgorithms) {
        const Tally t = timelines(algorithm, 2, false, seed++);
        if (HasFatalFailure()) {
            return;
        }
        EXPECT_GT(t.cached, 100) << algorithm;
    }
}

} // namespace
} // namespace throttle
