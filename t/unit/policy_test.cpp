// SPDX-License-Identifier: BSD-2-Clause
// The rules a zone's policy applies whatever its algorithm: what a zone of
// each algorithm accepts, what a reload may change, and how each mode
// decides and commits a key.
#include "policy_support.hpp"
#include "throttle/gcra.hpp"
#include "throttle/policy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace throttle {
namespace {

using namespace testing_support;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;

const char *const kAlgorithms[] = {"gcra", "fixed_window", "sliding_window",
                                   "sliding_log"};

std::string
refusal(const Parsed<Policy> &p)
{
    return p ? std::string() : std::string(p.error);
}

TEST(Algorithms, FoundByName)
{
    for (const char *name : kAlgorithms) {
        Message why;
        auto    found = find_algorithm(name, why);
        ASSERT_TRUE(found) << name;
        EXPECT_EQ((*found.value)->name, name);
    }
    EXPECT_EQ(default_algorithm().name, "gcra");

    // the meters of the seeds are GCRA: no second name for them
    for (const char *other : {"token_bucket", "leaky_bucket", "GCRA", ""}) {
        Message why;
        auto    found = find_algorithm(other, why);
        EXPECT_FALSE(found) << other;
        EXPECT_STREQ(found.error,
                     "is unknown (use \"gcra\", \"fixed_window\", "
                     "\"sliding_window\" or \"sliding_log\")");
    }
}

TEST(MakePolicy, WindowParameters)
{
    Policy p = make_test_policy("fixed_window", 30, kMinute, 5);
    EXPECT_EQ(p.window_us, kMinute);
    EXPECT_EQ(p.limit, 35);
    EXPECT_TRUE(p.algorithm->wall_clock);
    EXPECT_EQ(p.log_slots, 0);

    Policy g = make_test_policy("gcra", 30, kMinute, 5);
    EXPECT_FALSE(g.algorithm->wall_clock);
    EXPECT_EQ(g.limit, 6);
}

TEST(MakePolicy, GcraParameters)
{
    Policy p = make_test_policy("gcra", 3, kSecond, 2);
    EXPECT_EQ(p.emission_interval_us, 333'333);
    EXPECT_EQ(p.window_us, 999'999); // the tolerance
    EXPECT_EQ(p.limit, 3);
    EXPECT_EQ(gcra_params(p).tolerance_us, 999'999);
}

TEST(MakePolicy, RefusesToleranceThatWouldOverflow)
{
    EXPECT_EQ(refusal(try_policy("gcra", 1, 86'400 * kSecond, kMaxBurst)),
              "burst is too large for this rate (rate=1r/d burst=1000000000)");
    EXPECT_EQ(refusal(try_policy("gcra", 1, kSecond, -1)),
              "burst is out of range");
    EXPECT_TRUE(try_policy("gcra", 1, 86'400 * kSecond, 10'000));
    EXPECT_FALSE(try_policy("gcra", 1, 86'400 * kSecond, 1'000'000));
}

TEST(MakePolicy, ALogKeepsATimestampPerUnitUpToLogMax)
{
    Policy l = make_test_policy("sliding_log", 1000, kSecond, 0);
    EXPECT_EQ(l.log_slots, 1000);
    EXPECT_EQ(refusal(try_policy("sliding_log", 2000, kSecond, 5)),
              "rate=2000r/s burst=5 keeps 2005 timestamps per key, more than "
              "log_max=1000; raise log_max= (up to 100000: 8 bytes a "
              "timestamp per key) or use algorithm=sliding_window");
    EXPECT_FALSE(try_policy("sliding_log", 1000, kSecond, 1));
    EXPECT_TRUE(try_policy("sliding_log", 1000, kSecond, 1, Mode::local, 1001));

    // a strict zone's keys hold no log: Redis does
    Policy s = make_test_policy("sliding_log", 1000, kSecond, 0, Mode::strict);
    EXPECT_EQ(s.log_slots, 0);
}

TEST(MakePolicy, LogMaxBelongsToTheAlgorithmsThatTakeIt)
{
    for (const char *name : kAlgorithms) {
        auto p = try_policy(name, 10, kSecond, 0, Mode::local, 10);
        if (std::string(name) == "sliding_log") {
            EXPECT_TRUE(p);
        } else {
            EXPECT_EQ(refusal(p),
                      "\"log_max=\" needs \"algorithm=sliding_log\"");
        }
    }
}

TEST(MakePolicy, ALogCannotSyncAsync)
{
    for (const char *name : kAlgorithms) {
        auto p = try_policy(name, 10, kSecond, 0, Mode::async);
        if (std::string(name) == "sliding_log") {
            EXPECT_EQ(refusal(p),
                      "\"algorithm=sliding_log\" cannot "
                      "\"sync=async\"; use sync=strict, or "
                      "sliding_window");
        } else {
            EXPECT_TRUE(p) << name;
        }
    }
}

TEST(MakePolicy, ASlidingWindowCountsBelow2To31)
{
    const int64_t most = (int64_t{1} << 31) - 1;
    EXPECT_EQ(refusal(try_policy("sliding_window", most, 86'400 * kSecond, 1)),
              "the limit (the rate's count + burst) is above 2147483647, the "
              "most a sliding_window counts (rate=2147483647r/d burst=1)");
    EXPECT_TRUE(try_policy("fixed_window", most, 86'400 * kSecond, 1));
}

std::string
reload(const Policy &was, const Policy &now)
{
    Message     why;
    const char *r = reload_refusal(was, now, why);
    return r ? r : "";
}

TEST(ReloadRules, TheAlgorithmStays)
{
    EXPECT_EQ(reload(make_test_policy("fixed_window", 5, kSecond, 0),
                     make_test_policy("sliding_window", 5, kSecond, 0)),
              "changed its algorithm from fixed_window to sliding_window");
    EXPECT_EQ(reload(make_test_policy("gcra", 5, kSecond, 0),
                     make_test_policy("sliding_log", 5, kSecond, 0)),
              "changed its algorithm from gcra to sliding_log");
}

TEST(ReloadRules, RateBurstAndOtherModesMayChange)
{
    for (const char *name : {"gcra", "fixed_window", "sliding_window"}) {
        const Policy local = make_test_policy(name, 5, kSecond, 0);
        EXPECT_EQ(reload(local, make_test_policy(name, 50, kMinute, 7)), "");
        // a local zone's table has no key names for the sync
        EXPECT_EQ(
            reload(local, make_test_policy(name, 5, kSecond, 0, Mode::async)),
            "changed to sync=async");
        EXPECT_EQ(
            reload(make_test_policy(name, 5, kSecond, 0, Mode::async), local),
            "");
    }
}

TEST(ReloadRules, StrictComesAndGoesWhereItsMemoryIsAState)
{
    // GCRA's strict zones remember a lower bound of the TAT: a TAT still
    for (Mode other : {Mode::local, Mode::async}) {
        EXPECT_EQ(reload(make_test_policy("gcra", 5, kSecond, 0, other),
                         make_test_policy("gcra", 5, kSecond, 0, Mode::strict)),
                  "");
        EXPECT_EQ(reload(make_test_policy("gcra", 5, kSecond, 0, Mode::strict),
                         make_test_policy("gcra", 5, kSecond, 0, other)),
                  other == Mode::async ? "changed to sync=async" : "");
    }
    for (const char *name : {"fixed_window", "sliding_window", "sliding_log"}) {
        EXPECT_EQ(reload(make_test_policy(name, 5, kSecond, 0),
                         make_test_policy(name, 5, kSecond, 0, Mode::strict)),
                  "changed to or from sync=strict")
            << name;
        EXPECT_EQ(reload(make_test_policy(name, 5, kSecond, 0, Mode::strict),
                         make_test_policy(name, 5, kSecond, 0)),
                  "changed to or from sync=strict")
            << name;
    }
}

TEST(ReloadRules, ALocalLogKeepsItsLimit)
{
    const Policy was = make_test_policy("sliding_log", 3, kMinute, 0);
    EXPECT_EQ(reload(was, make_test_policy("sliding_log", 5, kMinute, 0)),
              "changed the timestamps its sliding_log keeps per key (its "
              "limit, or log_max= where the limit is a variable) from 3 to 5");
    EXPECT_EQ(reload(was, make_test_policy("sliding_log", 2, kMinute, 1)), "");
    // Redis keeps a strict zone's logs
    EXPECT_EQ(
        reload(make_test_policy("sliding_log", 3, kMinute, 0, Mode::strict),
               make_test_policy("sliding_log", 5, kMinute, 0, Mode::strict)),
        "");
}

// A strict zone decides nothing by itself but what Redis rejected, and
// forgets it when Redis admits the key.
TEST(StrictMode, RemembersRedisRejectionsUntilAnAdmission)
{
    const int64_t t0 = 1'700'000'000 * kSecond;
    for (const char *name : {"fixed_window", "sliding_window", "sliding_log"}) {
        const Policy p = make_test_policy(name, 5, kSecond, 0, Mode::strict);
        StoredKey    key;

        // nothing held: ask Redis
        EXPECT_FALSE(p.decide(nullptr, nullptr, t0, 1).result.limited);

        ThrottleResult redis;
        redis.limited = true;
        redis.limit = 5;
        redis.remaining = 0;
        redis.retry_after_us = 300'000;
        redis.reset_after_us = 300'000;
        Decision keep = p.remember_answer(nullptr, redis, 1, t0, t0 + 1'000);
        ASSERT_TRUE(keep.store) << name;
        p.commit(keep, t0 + 1'000, 1, key, nullptr);

        Decision again = p.decide(&key, nullptr, t0 + 100'000, 1);
        EXPECT_TRUE(again.result.limited) << name;
        EXPECT_EQ(again.result.retry_after_us, 200'000) << name;
        EXPECT_FALSE(again.store);
        // another cost goes to Redis; so does the same one once due
        EXPECT_FALSE(p.decide(&key, nullptr, t0 + 100'000, 2).result.limited);
        EXPECT_FALSE(p.decide(&key, nullptr, t0 + 300'000, 1).result.limited);

        // nothing worth keeping once stale
        EXPECT_FALSE(
            p.remember_answer(nullptr, redis, 1, t0, t0 + 400'000).store);

        // Redis admitted a request for the key (another cost): the window
        // counts more than the memory says
        ThrottleResult admitted;
        admitted.limit = 5;
        Decision forget =
            p.remember_answer(&key, admitted, 0, t0 + 100'000, t0 + 101'000);
        ASSERT_TRUE(forget.store) << name;
        p.commit(forget, t0 + 101'000, 0, key, nullptr);
        EXPECT_FALSE(p.decide(&key, nullptr, t0 + 102'000, 1).result.limited)
            << name;
    }
}

// A refund or a settle moves the key in Redis other than a decision does:
// the zone forgets what it remembered, and keeps none of the answers to
// scripts sent before Redis will have run it (they may tell of the key
// before), so that it never rejects what Redis would admit.
TEST(StrictMode, ARefundOrSettleForgetsTheAnswersBeforeIt)
{
    const int64_t t0 = 5'000 * kSecond;
    const Policy  p = make_test_policy("gcra", 1, kSecond, 1, Mode::strict);
    StoredKey     key;

    ThrottleResult redis;
    redis.limited = true;
    redis.limit = 2;
    redis.reset_after_us = 2 * kSecond;
    redis.retry_after_us = kSecond;
    p.commit(p.remember_answer(nullptr, redis, 1, t0, t0), t0, 1, key, nullptr);
    ASSERT_TRUE(p.decide(&key, nullptr, t0 + 100'000, 1).result.limited);

    // a settle gives units back: sent at +100 ms, run by +150 ms
    p.forget_answers(key, t0 + 100'000, t0 + 150'000);
    EXPECT_FALSE(p.decide(&key, nullptr, t0 + 100'000, 1).result.limited);

    // an answer to a decision sent before then tells of the key before
    EXPECT_FALSE(
        p.remember_answer(&key, redis, 1, t0 + 120'000, t0 + 160'000).store);
    // one sent after is Redis's newest word again
    EXPECT_TRUE(
        p.remember_answer(&key, redis, 1, t0 + 150'000, t0 + 160'000).store);
}

TEST(StrictMode, GcraRemembersALowerBoundOfTheTat)
{
    const int64_t t0 = 5'000 * kSecond;
    const Policy  p = make_test_policy("gcra", 1, kSecond, 1, Mode::strict);
    StoredKey     key;

    // knowing nothing of the key, it asks Redis, even about a cost that
    // can never fit: the answer's fields are the key's
    EXPECT_FALSE(p.decide(nullptr, nullptr, t0, 3).result.limited);
    EXPECT_FALSE(p.decide(nullptr, nullptr, t0, 2).result.limited);

    ThrottleResult redis;
    redis.limited = true;
    redis.limit = 2;
    redis.reset_after_us = 2 * kSecond; // the TAT, 2 s ahead
    redis.retry_after_us = kSecond;
    Decision keep = p.remember_answer(nullptr, redis, 1, t0, t0);
    ASSERT_TRUE(keep.store);
    EXPECT_EQ(keep.state.words[0], t0 + 2 * kSecond);
    p.commit(keep, t0, 1, key, nullptr);

    // any cost that the bound rejects is rejected
    EXPECT_TRUE(p.decide(&key, nullptr, t0 + 500'000, 1).result.limited);
    EXPECT_TRUE(p.decide(&key, nullptr, t0 + 500'000, 2).result.limited);
    EXPECT_FALSE(p.decide(&key, nullptr, t0 + kSecond, 1).result.limited);
    // and one that never fits, with the key's fields
    Decision never = p.decide(&key, nullptr, t0 + 500'000, 3);
    EXPECT_TRUE(never.result.limited);
    EXPECT_EQ(never.result.retry_after_us, -1);
    EXPECT_EQ(never.result.reset_after_us, 1'500'000);
}

// The sequence that once answered from a stale bound: rate=4r/s burst=2,
// T = 250 ms, limit 3. Redis admits cost 3 at t0 (TAT t0 + 750 ms),
// rejects cost 3 at +300 ms, admits cost 1 (TAT t0 + 1 s): the next cost 3
// is rejected with Redis's fields, from the TAT the admission moved to.
TEST(StrictMode, GcraRaisesItsBoundWithEveryAdmission)
{
    const int64_t t0 = 9'000 * kSecond;
    const int64_t ms = 1'000;
    const Policy  p = make_test_policy("gcra", 4, kSecond, 2, Mode::strict);
    StoredKey     key;

    auto answer = [&](bool limited, int64_t remaining, int64_t reset_after,
                      int64_t retry_after, int64_t cost, int64_t at) {
        ThrottleResult redis;
        redis.limited = limited;
        redis.limit = 3;
        redis.remaining = remaining;
        redis.reset_after_us = reset_after;
        redis.retry_after_us = retry_after;
        Decision d = p.remember_answer(&key, redis, cost, at, at);
        p.commit(d, at, cost, key, nullptr);
    };

    answer(false, 0, 750 * ms, -1, 3, t0);
    answer(true, 1, 450 * ms, 450 * ms, 3, t0 + 300 * ms);
    EXPECT_FALSE(p.decide(&key, nullptr, t0 + 300 * ms, 1).result.limited);
    answer(false, 0, 700 * ms, -1, 1, t0 + 300 * ms);

    Decision again = p.decide(&key, nullptr, t0 + 300 * ms, 3);
    EXPECT_TRUE(again.result.limited);
    EXPECT_EQ(again.result.remaining, 0);
    EXPECT_EQ(again.result.retry_after_us, 700 * ms);
    EXPECT_EQ(again.result.reset_after_us, 700 * ms);

    // an older answer arriving late does not lower the bound
    answer(true, 1, 450 * ms, 450 * ms, 3, t0 + 300 * ms);
    EXPECT_EQ(p.decide(&key, nullptr, t0 + 300 * ms, 3).result.retry_after_us,
              700 * ms);
}

TEST(StrictMode, ScriptCallsPerAlgorithm)
{
    const Policy gcra = make_test_policy("gcra", 30, kMinute, 15, Mode::strict);
    ScriptCall   call = gcra.decision_call(2);
    EXPECT_EQ(call.script->name, "gcra");
    ASSERT_EQ(call.args.n, 4u);
    EXPECT_EQ(call.args.values[0], 2'000'000);  // T
    EXPECT_EQ(call.args.values[1], 32'000'000); // DVT
    EXPECT_EQ(call.args.values[2], 16);
    EXPECT_EQ(call.args.values[3], 2);

    const int64_t tokens[2] = {1'763'000'000'000'000, 7};
    call = gcra.refund_call(2, tokens);
    EXPECT_EQ(call.script->name, "gcra_refund");
    ASSERT_EQ(call.args.n, 2u);
    EXPECT_EQ(call.args.values[0], 2'000'000);
    EXPECT_EQ(call.args.values[1], 2);

    const Policy log =
        make_test_policy("sliding_log", 30, kMinute, 5, Mode::strict);
    call = log.decision_call(3);
    EXPECT_EQ(call.script->name, "sliding_log");
    ASSERT_EQ(call.args.n, 3u);
    EXPECT_EQ(call.args.values[0], kMinute);
    EXPECT_EQ(call.args.values[1], 35);
    EXPECT_EQ(call.args.values[2], 3);
    call = log.refund_call(3, tokens); // ts, first seq, cost
    EXPECT_EQ(call.script->name, "sliding_log_refund");
    ASSERT_EQ(call.args.n, 3u);
    EXPECT_EQ(call.args.values[0], tokens[0]);
    EXPECT_EQ(call.args.values[1], 7);
    EXPECT_EQ(call.args.values[2], 3);

    const Policy sliding =
        make_test_policy("sliding_window", 30, kMinute, 5, Mode::strict);
    call = sliding.refund_call(3, tokens); // cost, window, its length
    EXPECT_EQ(call.script->name, "sliding_window_refund");
    ASSERT_EQ(call.args.n, 3u);
    EXPECT_EQ(call.args.values[0], 3);
    EXPECT_EQ(call.args.values[1], tokens[0]);
    EXPECT_EQ(call.args.values[2], kMinute);

    const Policy fixed =
        make_test_policy("fixed_window", 30, kMinute, 5, Mode::strict);
    EXPECT_EQ(fixed.decision_call(1).script->name, "fixed_window");
    call = fixed.refund_call(3, tokens); // cost, window
    EXPECT_EQ(call.script->name, "fixed_window_refund");
    ASSERT_EQ(call.args.n, 2u);
    EXPECT_EQ(call.args.values[0], 3);
    EXPECT_EQ(call.args.values[1], tokens[0]);
}

// An async zone decides as a local one, and counts what it charged.
TEST(AsyncMode, CommitCountsTheUnitsForTheNextSync)
{
    const int64_t t0 = 1'700'000'000 * kSecond;
    for (const char *name : {"gcra", "fixed_window", "sliding_window"}) {
        const Policy local = make_test_policy(name, 5, kSecond, 2);
        const Policy async = make_test_policy(name, 5, kSecond, 2, Mode::async);
        StoredSlot   a, b;
        int64_t      admitted = 0;
        for (int64_t cost : {1, 2, 0, 3, 5, 1}) {
            const Decision da = a.hit(local, t0 + cost, cost);
            const Decision db = b.hit(async, t0 + cost, cost);
            EXPECT_EQ(da.result.limited, db.result.limited) << name;
            EXPECT_EQ(da.result.remaining, db.result.remaining) << name;
            admitted += da.result.limited ? 0 : cost;
        }
        EXPECT_GT(admitted, 0);
        EXPECT_EQ(a.key.pending.units, 0) << name;
        EXPECT_EQ(async.pending_total(b.key.pending), admitted) << name;
    }
}

TEST(AsyncMode, GcraSyncLayoutAndAnswer)
{
    const int64_t t0 = 5'000 * kSecond;
    const Policy  p = make_test_policy("gcra", 10, kSecond, 4, Mode::async);
    SyncLayout    layout = p.sync_layout();
    EXPECT_EQ(layout.script->name, "gcra_sync");
    ASSERT_EQ(layout.head_args, 2u);
    ASSERT_EQ(layout.key_args, 2u);
    EXPECT_EQ(layout.reply_head, 0u);
    EXPECT_EQ(layout.reply_per_key, 1u);

    int64_t head[2];
    p.sync_head_args(head);
    EXPECT_EQ(head[0], 100'000); // T
    EXPECT_EQ(head[1], 200'000); // grace: twice the sync interval

    int64_t key_args[2];
    p.sync_key_args({3, t0 - 50'000}, t0, key_args);
    EXPECT_EQ(key_args[0], 3);
    EXPECT_EQ(key_args[1], 50'000);
    // units kept through an outage are placed no further back than grace
    p.sync_key_args({3, t0 - 10 * kSecond}, t0, key_args);
    EXPECT_EQ(key_args[1], 200'000);
    p.sync_key_args({0, 0}, t0, key_args);
    EXPECT_EQ(key_args[1], 0);

    // Redis's TAT 400 ms ahead, and 2 units charged here since
    StoredKey key;
    key.pending = {2, t0 + 1'000};
    const int64_t ttl = 400'000;
    ASSERT_TRUE(p.apply_sync(nullptr, &ttl, t0, t0 + 2'000, key));
    EXPECT_EQ(key.state.words[0], t0 + 400'000 + 2 * 100'000);
    EXPECT_EQ(key.expire_at_us, key.state.words[0]);

    // fresh everywhere: nothing to learn
    const int64_t fresh = 0;
    EXPECT_FALSE(p.apply_sync(nullptr, &fresh, t0, t0 + 2'000, key));
}

TEST(AsyncMode, WindowSyncLayouts)
{
    const Policy fixed =
        make_test_policy("fixed_window", 10, kMinute, 0, Mode::async);
    SyncLayout layout = fixed.sync_layout();
    EXPECT_EQ(layout.script->name, "fixed_window_sync");
    EXPECT_EQ(layout.head_args, 1u);
    EXPECT_EQ(layout.key_args, 3u);
    EXPECT_EQ(layout.reply_head, 1u);
    EXPECT_EQ(layout.reply_per_key, 1u);

    const Policy sliding =
        make_test_policy("sliding_window", 10, kMinute, 0, Mode::async);
    layout = sliding.sync_layout();
    EXPECT_EQ(layout.script->name, "sliding_window_sync");
    EXPECT_EQ(layout.reply_per_key, 2u);

    int64_t head[1];
    sliding.sync_head_args(head);
    EXPECT_EQ(head[0], kMinute);

    // units of the node's window, of the one before, its age
    const int64_t start = 29'383'333 * kMinute;
    int64_t       args[3];
    sliding.sync_key_args({pack_counts(2, 5), start}, start + 7'000, args);
    EXPECT_EQ(args[0], 5);
    EXPECT_EQ(args[1], 2);
    EXPECT_EQ(args[2], 7'000);
}

} // namespace
} // namespace throttle
