// SPDX-License-Identifier: BSD-2-Clause
// Redis key names and script replies, decoded by hiredis's own reader from
// RESP bytes as they come off the wire.
#include "policy_support.hpp"
#include "throttle/crc16.hpp"
#include "throttle/gcra.hpp"
#include "throttle/lua.hpp"
#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace throttle {
namespace {

// (the key points into `k`)
ZoneKey
zone_key(const std::string &k)
{
    return ZoneKey(reinterpret_cast<const unsigned char *>(k.data()), k.size());
}

std::string
key_name(std::string_view prefix, std::string_view zone, const std::string &k,
         HashTag tag = HashTag::key)
{
    const ZoneKey     key = zone_key(k);
    std::vector<char> buf(max_redis_key_len(prefix.size(), zone.size()));
    size_t            n = format_redis_key(buf.data(), prefix, zone, key, tag);
    EXPECT_LE(n, buf.size());
    return {buf.data(), n};
}

TEST(RedisKey, PlainKeysReadAsThemselves)
{
    EXPECT_EQ(key_name("throttle:", "reply", "alice"),
              "throttle:reply:{alice}");
    EXPECT_EQ(key_name("", "z", "user@example.com/a=1+2"),
              "z:{user@example.com/a=1+2}");
}

TEST(RedisKey, OddBytesAreHexAndCannotMoveTheHashTag)
{
    EXPECT_EQ(key_name("t:", "z", std::string("\x7f\x00\x00\x01", 4)),
              "t:z:{~7f000001}");
    EXPECT_EQ(key_name("t:", "z", "a}b{"), "t:z:{~617d627b}");
    // "~..." as a literal key is itself hex-encoded: no collision with the
    // encoding of another key
    EXPECT_EQ(key_name("t:", "z", "~61"), "t:z:{~7e3631}");
    EXPECT_NE(key_name("t:", "z", "a"), key_name("t:", "z", "~61"));
}

TEST(RedisKey, NulBytesAreNotPlain)
{
    // $binary_remote_addr of 65.0.0.66: "A", two NULs, "B" (found by the
    // redis_key fuzz target: strchr() had found NUL in the plain alphabet)
    EXPECT_EQ(key_name("t:", "z", std::string("A\0\0B", 4)), "t:z:{~41000042}");
    EXPECT_EQ(key_name("t:", "z", std::string(1, '\0')), "t:z:{~00}");
}

// Literal names, which the Perl of the integration tests
// (ThrottleTest::Redis::async_key) computes on its own: the two agree.
TEST(RedisKey, AsyncZonesTagTheZoneAndAShard)
{
    EXPECT_EQ(key_name("throttle:", "reply", "alice", HashTag::shard),
              "throttle:{reply:13}:alice");
    EXPECT_EQ(key_name("throttle:", "z", "bob", HashTag::shard),
              "throttle:{z:11}:bob");
    EXPECT_EQ(key_name("t:", "z", "a}b{", HashTag::shard),
              "t:{z:11}:~617d627b");
    std::string longest(kMaxInlineKeyLen, '\xff');
    EXPECT_EQ(key_name("p:", "zone", longest, HashTag::shard),
              "p:{zone:14}:~" + std::string(2 * kMaxInlineKeyLen, 'f'));
}

TEST(RedisKey, TheLongestNameFitsItsRoom)
{
    // the longest key in hex, in the shard of the most digits
    std::string longest(kMaxInlineKeyLen, '\xff');
    while (async_shard(zone_key(longest)) < 10) {
        longest[0]++;
    }
    EXPECT_EQ(key_name("p:", "zone", longest, HashTag::shard).size(),
              max_redis_key_len(2, 4));
}

TEST(RedisKey, AsyncShardsSpreadKeys)
{
    // the CRC of Redis Cluster (CRC16("123456789") = 0x31c3), modulo 16
    EXPECT_EQ(async_shard(zone_key("123456789")), 0x31c3u % kAsyncShards);
    // a long key's shard is its digest's, as the zone stores it
    const std::string long_key(kMaxInlineKeyLen + 1, 'a');
    const ZoneKey     key = zone_key(long_key);
    ASSERT_TRUE(key.hashed());
    EXPECT_EQ(async_shard(key), crc16(key.data(), key.size()) % kAsyncShards);

    unsigned seen[kAsyncShards] = {};
    for (int i = 0; i < 1600; i++) {
        seen[async_shard(zone_key("user" + std::to_string(i)))]++;
    }
    for (unsigned n : seen) {
        EXPECT_GT(n, 50u);
        EXPECT_LT(n, 150u);
    }
}

TEST(RedisKey, LongKeysUseTheirDigest)
{
    std::string longest(kMaxInlineKeyLen, '\xff');
    // (an async name's shard makes the longest: TheLongestNameFitsItsRoom)
    EXPECT_LE(key_name("p:", "zone", longest).size(), max_redis_key_len(2, 4));
    std::string k = key_name("p:", "z", std::string(70000, 'a'));
    EXPECT_EQ(k.substr(0, 6), "p:z:{#");
    EXPECT_EQ(k.size(), 6 + 64 + 1u);
}

struct ReplyDeleter {
    void operator()(void *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Reply
parse(const std::string &resp)
{
    redisReader *reader = redisReaderCreate();
    EXPECT_EQ(redisReaderFeed(reader, resp.data(), resp.size()), REDIS_OK);
    void *reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    redisReaderFree(reader);
    return Reply(static_cast<redisReply *>(reply));
}

TEST(DecisionReply, Decision)
{
    Reply       r = parse("*5\r\n:1\r\n:5\r\n:2\r\n:3000000\r\n:3000000\r\n");
    ScriptReply d = decode_decision_reply(r.get(), 0);
    ASSERT_TRUE(d.ok);
    EXPECT_TRUE(d.result.limited);
    EXPECT_EQ(d.result.limit, 5);
    EXPECT_EQ(d.result.remaining, 2);
    EXPECT_EQ(d.result.reset_after_us, 3'000'000);
    EXPECT_EQ(d.result.retry_after_us, 3'000'000);

    d = decode_decision_reply(
        parse("*5\r\n:0\r\n:16\r\n:15\r\n:2000000\r\n:-1\r\n").get(), 0);
    ASSERT_TRUE(d.ok);
    EXPECT_FALSE(d.result.limited);
    EXPECT_EQ(d.result.retry_after_us, -1);
}

TEST(DecisionReply, ErrorsAreNeverDecisions)
{
    Reply noscript =
        parse("-NOSCRIPT No matching script. Please use EVAL.\r\n");
    ScriptReply d = decode_decision_reply(noscript.get(), 0);
    EXPECT_FALSE(d.ok);
    EXPECT_EQ(d.message.substr(0, 8), "NOSCRIPT");

    Reply wrongpass = parse("-WRONGPASS invalid username-password pair\r\n");
    d = decode_decision_reply(wrongpass.get(), 0);
    EXPECT_FALSE(d.ok);
    EXPECT_EQ(d.message.substr(0, 9), "WRONGPASS");

    for (const char *bad : {
             "+OK\r\n",                                    // status
             ":1\r\n",                                     // integer
             "*4\r\n:0\r\n:5\r\n:2\r\n:3\r\n",             // short
             "*5\r\n:0\r\n:5\r\n$1\r\n2\r\n:3\r\n:-1\r\n", // string
             "*5\r\n:2\r\n:5\r\n:2\r\n:3\r\n:-1\r\n",      // limited=2
             "*5\r\n:0\r\n:5\r\n:-2\r\n:3\r\n:-1\r\n",     // remaining<0
             "*5\r\n:0\r\n:5\r\n:2\r\n:3\r\n:7\r\n",       // passed, retry
             "*5\r\n:0\r\n:0\r\n:2\r\n:3\r\n:-1\r\n",      // limit 0
         })
    {
        EXPECT_FALSE(decode_decision_reply(parse(bad).get(), 0).ok) << bad;
    }
    EXPECT_FALSE(decode_decision_reply(nullptr, 0).ok);
}

TEST(DecisionReply, LimitedWithNoWaitIsAnError)
{
    // no script rejects a request that would pass at once (found by the
    // strict_reply fuzz target)
    EXPECT_FALSE(
        decode_decision_reply(
            parse("*5\r\n:1\r\n:16\r\n:0\r\n:2000000\r\n:0\r\n").get(), 0)
            .ok);
    // rejected for good: no retry time
    EXPECT_TRUE(decode_decision_reply(
                    parse("*5\r\n:1\r\n:16\r\n:0\r\n:0\r\n:-1\r\n").get(), 0)
                    .ok);
}

TEST(DecisionReply, NumbersBeyondTheScriptsAreErrors)
{
    // The scripts' numbers stay below 2^53; Redis's time to reset, added
    // to the zone's clock, overflowed (found by the strict_reply fuzz
    // target: UBSan in GCRA's and the generic memory of rejections).
    const std::string largest = std::to_string((int64_t{1} << 53) - 1);
    const Policy      gcra = testing_support::make_test_policy(
             "gcra", 30, 60'000'000, 15, Mode::strict);
    const Policy fixed = testing_support::make_test_policy(
        "fixed_window", 30, 60'000'000, 15, Mode::strict);
    for (const char *beyond : {"9007199254740992", "9223372036854775807"}) {
        Reply r = parse(std::string("*5\r\n:1\r\n:16\r\n:0\r\n:") + beyond
                        + "\r\n:5\r\n");
        EXPECT_FALSE(gcra.read_decision(r.get()).ok) << beyond;
        Reply t = parse("*6\r\n:1\r\n:16\r\n:0\r\n:5\r\n:5\r\n:"
                        + std::string(beyond) + "\r\n");
        EXPECT_FALSE(fixed.read_decision(t.get()).ok) << beyond;
    }

    // the largest a script may send is remembered without overflow
    const int64_t sent_at = 1'763'000'000'000'000;
    for (const Policy *p : {&gcra, &fixed}) {
        Reply r = parse(
            "*" + std::to_string(5 + p->algorithm->strict_scripts().tokens)
            + "\r\n:1\r\n:16\r\n:0\r\n:" + largest + "\r\n:" + largest
            + "\r\n:0\r\n");
        ScriptReply d = p->read_decision(r.get());
        ASSERT_TRUE(d.ok);
        Decision kept =
            p->remember_answer(nullptr, d.result, 1, sent_at, sent_at);
        EXPECT_EQ(kept.expire_at_us, sent_at + (int64_t{1} << 53) - 1);
    }
}

TEST(DecisionReply, TokensFollowTheResult)
{
    Reply       r = parse("*7\r\n:0\r\n:10\r\n:7\r\n:1000000\r\n:-1\r\n"
                                ":1763000000123456\r\n:3\r\n");
    ScriptReply d = decode_decision_reply(r.get(), 2);
    ASSERT_TRUE(d.ok);
    EXPECT_EQ(d.result.remaining, 7);
    EXPECT_EQ(d.tokens[0], 1'763'000'000'123'456);
    EXPECT_EQ(d.tokens[1], 3);

    // a reply of another length than the script's is an error
    EXPECT_FALSE(decode_decision_reply(r.get(), 1).ok);
    EXPECT_FALSE(decode_decision_reply(r.get(), 0).ok);
    Reply s = parse("*6\r\n:0\r\n:10\r\n:7\r\n:1000000\r\n:-1\r\n"
                    "$2\r\nxx\r\n");
    EXPECT_FALSE(decode_decision_reply(s.get(), 1).ok);
}

TEST(SyncReply, TimesToLive)
{
    int64_t ttls[3] = {-1, -1, -1};
    Reply   r = parse("*3\r\n:0\r\n:2000000\r\n:17\r\n");
    EXPECT_EQ(decode_sync_reply(r.get(), 3, ttls), nullptr);
    EXPECT_EQ(ttls[0], 0);
    EXPECT_EQ(ttls[1], 2'000'000);
    EXPECT_EQ(ttls[2], 17);

    EXPECT_NE(decode_sync_reply(r.get(), 2, ttls), nullptr); // wrong length
    Reply neg = parse("*1\r\n:-5\r\n");
    EXPECT_NE(decode_sync_reply(neg.get(), 1, ttls), nullptr);
    Reply err = parse("-BUSY Redis is busy running a script\r\n");
    EXPECT_EQ(std::string(decode_sync_reply(err.get(), 1, ttls)).substr(0, 4),
              "BUSY");
    EXPECT_NE(decode_sync_reply(nullptr, 1, ttls), nullptr);
}

TEST(SyncReply, NumbersBeyondTheScriptsAreErrors)
{
    // a TTL past 2^53 overflowed the TAT it is added to (found by the
    // sync_reply fuzz target)
    int64_t ttls[3];
    Reply   r = parse("*3\r\n:2\r\n:0\r\n:9223372036854775807\r\n");
    EXPECT_NE(decode_sync_reply(r.get(), 3, ttls), nullptr);
    Reply largest = parse("*1\r\n:9007199254740991\r\n");
    EXPECT_EQ(decode_sync_reply(largest.get(), 1, ttls), nullptr);
    EXPECT_EQ(ttls[0], (int64_t{1} << 53) - 1);
}

TEST(ReplyReader, ArraysLongerThanAnyScriptsAreRefused)
{
    // "*2000000000" had hiredis allocate 16 GiB, then spend seconds
    // walking it when the reader was freed (found by the strict_reply
    // fuzz target: libFuzzer's malloc limit)
    for (const char *announced : {"*2000000000\r\n", "*1\r\n*65537\r\n"}) {
        redisReader *reader = open_reply_reader();
        ASSERT_NE(reader, nullptr);
        ASSERT_EQ(redisReaderFeed(reader, announced, std::strlen(announced)),
                  REDIS_OK);
        void *reply = nullptr;
        EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_ERR) << announced;
        EXPECT_STREQ(reply_reader_error(reader),
                     "an array longer than any script's reply");
        redisReaderFree(reader);
    }

    // as long as the bound: read, and other errors say what hiredis says
    std::string longest = "*" + std::to_string(kMaxReplyElements) + "\r\n";
    for (int i = 0; i < kMaxReplyElements; i++) {
        longest += ":1\r\n";
    }
    redisReader *reader = open_reply_reader();
    ASSERT_NE(reader, nullptr);
    ASSERT_EQ(redisReaderFeed(reader, longest.data(), longest.size()),
              REDIS_OK);
    void *reply = nullptr;
    ASSERT_EQ(redisReaderGetReply(reader, &reply), REDIS_OK);
    ASSERT_NE(reply, nullptr);
    EXPECT_EQ(static_cast<redisReply *>(reply)->elements,
              static_cast<size_t>(kMaxReplyElements));
    freeReplyObject(reply);
    ASSERT_EQ(redisReaderFeed(reader, "!x\r\n", 4), REDIS_OK);
    EXPECT_EQ(redisReaderGetReply(reader, &reply), REDIS_ERR);
    EXPECT_STREQ(reply_reader_error(reader), reader->errstr);
    redisReaderFree(reader);
}

TEST(GcraSync, MergedViewAddsWhatWasChargedSince)
{
    // batch sent at 10 s; Redis: TAT 3 s ahead; 2 more units at T = 0.5 s
    EXPECT_EQ(synced_tat(10'000'000, 3'000'000, 500'000, 2), 14'000'000);
    EXPECT_EQ(synced_tat(10'000'000, 0, 500'000, 0), 10'000'000);
}

TEST(Scripts, EmbeddedWithTheirSha1AfterThePrelude)
{
    EXPECT_EQ(lua::gcra.name, "gcra");
    EXPECT_NE(lua::gcra.source.find("local function clock_us"),
              std::string_view::npos);
    EXPECT_NE(lua::gcra.source.find("funnel_tat(KEYS[1], now)"),
              std::string_view::npos);
    EXPECT_EQ(lua::gcra.sha1.size(), 40u);
    EXPECT_EQ(lua::gcra_refund.name, "gcra_refund");
    EXPECT_NE(lua::gcra_refund.sha1, lua::gcra.sha1);
    EXPECT_EQ(lua::gcra_sync.name, "gcra_sync");
}

} // namespace
} // namespace throttle
