// SPDX-License-Identifier: BSD-2-Clause
// Resetting a key (throttle_api's DELETE): what each mode keeps of it in
// the zone (Policy::reset()), the script that deletes it in Redis
// (Policy::reset_call(), by the name the zone's own scripts use), and the
// zones that refuse it (reset_refusal()). The script runs on a real
// redis-server (redis_fixture.hpp): after it, every algorithm answers as
// for a key never seen.
#include "redis_fixture.hpp"

#include "policy_support.hpp"
#include "throttle/lua.hpp"
#include "throttle/policy.hpp"
#include "throttle/redis.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace throttle {
namespace {

using namespace testing_support;

// A time on every window's start, as the windows are aligned.
constexpr int64_t kT0 = 5'000 * kSecond;

// What Redis answers a 6th request of cost 1 at kT0 for a key of a limit
// of 5: the local algorithm's answer, which the scripts match.
ThrottleResult
refused_sixth(std::string_view name)
{
    const Policy   local = limit_of_5(name);
    StoredSlot     slot;
    ThrottleResult answer;
    for (int i = 0; i < 6; i++) {
        answer = slot.hit(local, kT0, 1).result;
    }
    EXPECT_TRUE(answer.limited) << name;
    return answer;
}

// A strict zone decides nothing by itself: it forgets its memory of the
// key, and, until Redis has deleted it, remembers none of the answers to
// scripts sent before (they tell of the key before the reset), so that
// it never rejects the fresh key from an old answer.
TEST(Reset, AStrictZoneForgetsTheKeyBehindAFence)
{
    const int64_t at = kT0 + 10'000; // the reset
    const int64_t by = kT0 + 60'000; // Redis has run its script

    for (const char *name : kEveryAlgorithm) {
        const Policy         p = limit_of_5(name, Mode::strict);
        const ThrottleResult refused = refused_sixth(name);
        StoredKey            key;

        Decision keep = p.remember_answer(nullptr, refused, 1, kT0, kT0);
        ASSERT_TRUE(keep.store) << name;
        p.commit(keep, kT0, 1, key, nullptr);
        ASSERT_TRUE(p.decide(&key, nullptr, at, 1).result.limited) << name;

        ASSERT_TRUE(p.reset(key, at, by)) << name;
        EXPECT_FALSE(p.decide(&key, nullptr, at, 1).result.limited) << name;

        // answers to scripts sent before Redis has run the reset's
        EXPECT_FALSE(p.remember_answer(&key, refused, 1, kT0, at).store)
            << name;
        EXPECT_FALSE(p.remember_answer(&key, refused, 1, by - 1, by).store)
            << name;

        // the slot holds the fence, and may go to another key after it
        std::vector<int64_t> words(static_cast<size_t>(p.slot_words()), 0);
        p.store_slot(key, words.data());
        EXPECT_EQ(p.slot_free_at(words.data()), by) << name;

        // then Redis's word counts again
        EXPECT_TRUE(p.remember_answer(&key, refused, 1, by, by + 1).store)
            << name;
    }
}

// A key the strict zone does not hold gets the fence too: a script of it
// may be on its way.
TEST(Reset, AStrictZoneFencesAKeyItDoesNotHold)
{
    const Policy p = limit_of_5("gcra", Mode::strict);
    StoredKey    key;

    ASSERT_TRUE(p.reset(key, kT0, kT0 + 50'000));
    EXPECT_FALSE(p.decide(&key, nullptr, kT0, 1).result.limited);
    EXPECT_FALSE(
        p.remember_answer(&key, refused_sixth("gcra"), 1, kT0, kT0).store);

    std::vector<int64_t> words(static_cast<size_t>(p.slot_words()), 0);
    p.store_slot(key, words.data());
    EXPECT_EQ(p.slot_free_at(words.data()), kT0 + 50'000);
}

// A local or async zone holds the key's state itself: its slot goes (the
// glue empties it, and an async key's record with its units), and the
// key is a new key's from then on. Policy::reset() leaves it untouched.
TEST(Reset, ALocalOrAsyncZoneLetsTheSlotGo)
{
    for (const char *name : kEveryAlgorithm) {
        for (Mode mode : {Mode::local, Mode::async}) {
            auto made =
                try_policy(name, name == std::string("gcra") ? 10 : 5, kSecond,
                           name == std::string("gcra") ? 4 : 0, mode);
            if (!made) {
                continue; // sliding_log cannot sync=async
            }
            const Policy p = *made.value;
            StoredSlot   slot;
            for (int i = 0; i < 5; i++) {
                slot.hit(p, kT0, 1);
            }
            ASSERT_TRUE(slot.peek(p, kT0, 1).result.limited) << name;

            const StoredSlot before = slot;
            EXPECT_FALSE(p.reset(slot.key, kT0, kT0 + 50'000)) << name;
            EXPECT_TRUE(same_slot(slot, before)) << name;

            // a new key's slot (what the zone gives it next)
            StoredSlot fresh;
            EXPECT_FALSE(fresh.peek(p, kT0, 1).result.limited) << name;
        }
    }
}

TEST(Reset, TheScriptIsForZonesWithRedis)
{
    for (const char *name : kEveryAlgorithm) {
        EXPECT_EQ(limit_of_5(name).reset_call().script, nullptr) << name;

        const Policy strict = limit_of_5(name, Mode::strict);
        EXPECT_EQ(strict.reset_call().script, &lua::reset) << name;
        EXPECT_EQ(strict.reset_call().args.n, 0u) << name;
        EXPECT_EQ(strict.redis_hash_tag(), HashTag::key) << name;
    }

    const Policy async = limit_of_5("gcra", Mode::async);
    EXPECT_EQ(async.reset_call().script, &lua::reset);
    EXPECT_EQ(async.redis_hash_tag(), HashTag::shard);
}

TEST(Reset, AConcurrentZoneRefuses)
{
    Message why;

    for (Mode mode : {Mode::local, Mode::strict}) {
        const char *refusal =
            reset_refusal(concurrent_policy(3, kDefaultLeaseUs, mode), why);
        ASSERT_NE(refusal, nullptr);
        EXPECT_EQ(std::string(refusal),
                  "is a \"concurrent=\" zone, whose places are held by "
                  "requests still running and free themselves when these "
                  "end (within a lease if their nginx is gone): a reset "
                  "cannot end them");
    }

    for (const char *name : kEveryAlgorithm) {
        EXPECT_EQ(reset_refusal(limit_of_5(name, Mode::strict), why), nullptr)
            << name;
    }
}

class ResetInRedis : public RedisScripts {};

// After the script, every algorithm's decision script answers as for a
// key it never saw; a second reset finds nothing.
TEST_F(ResetInRedis, AKeyIsFreshAfterTheScript)
{
    const int64_t now = realtime_now_us();

    for (const char *name : kEveryAlgorithm) {
        const Policy         p = limit_of_5(name, Mode::strict);
        const std::string    key = std::string("t:reset:") + name;
        const ThrottleResult fresh =
            result(decide_in_redis(p, std::string("t:never:") + name, now, 1));

        for (int i = 0; i < 5; i++) {
            decide_in_redis(p, key, now, 1);
        }
        ASSERT_TRUE(result(decide_in_redis(p, key, now, 1)).limited) << name;

        EXPECT_EQ(integer(evalsha(p.reset_call(), key)), 1) << name;
        EXPECT_EQ(integer({"EXISTS", key}), 0) << name;
        EXPECT_EQ(integer(evalsha(p.reset_call(), key)), 0) << name;

        const ThrottleResult after = result(decide_in_redis(p, key, now, 1));
        EXPECT_TRUE(same(after, fresh))
            << name << ": " << str(after) << " != " << str(fresh);
    }
}

// An async zone's key is named by its shard, as its sync script names it.
TEST_F(ResetInRedis, AnAsyncKeyIsDeletedByItsShardName)
{
    const Policy      p = limit_of_5("gcra", Mode::async);
    const std::string raw = "alice";
    const ZoneKey     key(reinterpret_cast<const unsigned char *>(raw.data()),
                          raw.size());
    std::vector<char> buf(max_redis_key_len(9, 1));
    const std::string name(buf.data(),
                           format_redis_key(buf.data(), "throttle:", "z", key,
                                            p.redis_hash_tag()));

    EXPECT_EQ(name,
              "throttle:{z:" + std::to_string(async_shard(key)) + "}:alice");
    run({"SET", name, "1", "PX", "60000"});
    EXPECT_EQ(integer(evalsha(p.reset_call(), name)), 1);
    EXPECT_EQ(integer({"EXISTS", name}), 0);
}

} // namespace
} // namespace throttle
