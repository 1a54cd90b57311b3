// SPDX-License-Identifier: BSD-2-Clause
// The async sync scripts where each key has its own rate (a zone whose
// rate= is a variable: docs/plans.md): a head of 0 says each key sends its
// own emission interval or window, after its other arguments, and each
// key's units move its state by its own.
#include "redis_fixture.hpp"

#include "throttle/clock.hpp"
#include "throttle/lua.hpp"

#include <gtest/gtest.h>

namespace throttle {
namespace {

using namespace testing_support;

class PlanSyncInRedis : public RedisScripts {
  protected:
    static std::vector<int64_t> sync(const Script                   &script,
                                     const std::vector<std::string> &keys,
                                     const std::vector<int64_t>     &argv)
    {
        std::vector<std::string> args = {"EVALSHA", std::string(script.sha1),
                                         std::to_string(keys.size())};
        args.insert(args.end(), keys.begin(), keys.end());
        for (int64_t a : argv) {
            args.push_back(std::to_string(a));
        }
        return integers(script, run(args).get());
    }
};

TEST_F(PlanSyncInRedis, GcraKeysMoveByTheirOwnInterval)
{
    const int64_t grace = 1000 * kSecond;

    // a: 3 units at 1 s each; b: 2 units at 10 s; c: only read
    std::vector<int64_t> ttls =
        sync(lua::gcra_sync, {"t:pg:a", "t:pg:b", "t:pg:c"},
             {0, grace, 3, 0, kSecond, 2, 0, 10 * kSecond, 0, 0, kSecond});
    ASSERT_EQ(ttls.size(), 3u);
    EXPECT_EQ(ttls[0], 3 * kSecond);
    EXPECT_EQ(ttls[1], 20 * kSecond);
    EXPECT_EQ(ttls[2], 0);
    EXPECT_EQ(integer({"EXISTS", "t:pg:c"}), 0);

    // b again, now at a's interval: it queues behind what it holds
    ttls = sync(lua::gcra_sync, {"t:pg:b"}, {0, grace, 1, 0, kSecond});
    ASSERT_EQ(ttls.size(), 1u);
    EXPECT_GT(ttls[0], 20 * kSecond);
    EXPECT_LE(ttls[0], 21 * kSecond);

    // a zone of one rate sends it in the head, two integers a key
    ttls = sync(lua::gcra_sync, {"t:pg:d", "t:pg:e"},
                {kSecond, grace, 4, 0, 1, 0});
    ASSERT_EQ(ttls.size(), 2u);
    EXPECT_EQ(ttls[0], 4 * kSecond);
    EXPECT_EQ(ttls[1], kSecond);
}

TEST_F(PlanSyncInRedis, WindowKeysCountInTheirOwnWindow)
{
    const int64_t hour = 3600 * kSecond;
    const int64_t day = 24 * hour;
    while (realtime_now_us() % hour > hour - 10 * kSecond) {
        sleep_ms(100);
    }
    const int64_t t = realtime_now_us();

    // a counts per day, b per hour; each sends how far into its own
    // window the node is, and the window
    std::vector<int64_t> r =
        sync(lua::fixed_window_sync, {"t:pw:a", "t:pw:b"},
             {0, 3, 0, t % day, day, 4, 0, t % hour, hour});
    ASSERT_EQ(r.size(), 3u);
    // Redis's clock, from which each key's place in its window follows
    EXPECT_GE(r[0], t);
    EXPECT_LT(r[0], t + 5 * kSecond);
    EXPECT_EQ(r[1], 3);
    EXPECT_EQ(r[2], 4);
    Reply w = run({"HGET", "t:pw:b", "w"});
    ASSERT_TRUE(w && w->type == REDIS_REPLY_STRING);
    EXPECT_EQ(std::stoll(std::string(w->str, w->len)), t - t % hour);
    EXPECT_LE(integer({"PTTL", "t:pw:b"}), hour / 1000);

    r = sync(lua::sliding_window_sync, {"t:ps:a", "t:ps:b"},
             {0, 2, 1, t % day, day, 5, 0, t % hour, hour});
    ASSERT_EQ(r.size(), 5u);
    EXPECT_EQ(r[1], 1);
    EXPECT_EQ(r[2], 2);
    EXPECT_EQ(r[3], 0);
    EXPECT_EQ(r[4], 5);
}

} // namespace
} // namespace throttle
