// SPDX-License-Identifier: BSD-2-Clause
// Strict zones: the bytes Redis sends back for decision scripts, read as
// the transport reads them (its reader, fed what each recv() brings)
// and used as a strict zone uses them: Policy::read_decision(); then the
// answer is remembered in the zone, which recalls later requests by
// itself, and a charge another zone refused is given back by
// Policy::refund_call() with the reply's tokens.
//
// Setup line: "<algorithm> <rate> <burst> <cost> <round trip, us> <bytes
// per recv>", e.g. "sliding_log 10r/s 5 1 250 16384".
#include "support.hpp"

namespace throttle::fuzz {
namespace {

// One request's command: its cost, and when it left and its reply came
// (the zone's clock).
struct Command {
    int64_t cost;
    int64_t sent_at_us;
    int64_t replied_us;
};

// Later requests of the same cost and of one unit more, at times around
// what the memory said, are decided from it alone or sent to Redis.
void
recall(const Policy &policy, const StoredKey &key, const Command &cmd,
       const ThrottleResult &answer)
{
    const std::optional<int64_t> times[] = {
        cmd.replied_us, later(cmd.replied_us, 1), later(key.expire_at_us, -1),
        later(key.expire_at_us, 0),
        later(cmd.sent_at_us, answer.retry_after_us)};
    for (std::optional<int64_t> now : times) {
        if (!now) {
            continue;
        }
        for (int64_t cost : {cmd.cost, cmd.cost + 1}) {
            Decision d = policy.decide(&key, nullptr, *now, cost);
            check_decision(d, policy);
            expect(!d.store, "a strict zone's recall never stores");
        }
    }
}

void
use_reply(const Policy &policy, const Command &cmd, StoredKey &key,
          const redisReply *reply)
{
    const ScriptReply answer = policy.read_decision(reply);
    if (!answer.ok) {
        return;
    }

    // the decision the request gets: Redis's
    check_result(answer.result);
    expect(answer.result.limit >= 1, "Redis's limit >= 1");
    check_headers(answer.result, policy);

    if (!answer.result.limited) {
        const ScriptCall refund = policy.refund_call(cmd.cost, answer.tokens);
        expect(refund.script != nullptr && refund.args.n <= 4,
               "a refund is a script call of at most 4 arguments");
    }

    const Decision kept = policy.remember_answer(
        &key, answer.result, cmd.cost, cmd.sent_at_us, cmd.replied_us);
    policy.commit(kept, cmd.replied_us, cmd.cost, key, nullptr);
    recall(policy, key, cmd, answer.result);
}

} // namespace

void
fuzz_one(std::string_view input)
{
    std::string_view redis;
    SetupLine        setup = SetupLine::split(input, redis);
    const Policy     policy = accepted_policy(zone_params(setup, Mode::strict));

    Command cmd;
    cmd.cost = setup.count(kMaxCost, 1);
    cmd.sent_at_us = send_time(policy);
    // at most the longest timeout= (2^31 - 1 ms)
    cmd.replied_us = cmd.sent_at_us + setup.count(2'147'483'647'000, 250);
    const int64_t chunk = std::max<int64_t>(1, setup.count(16384, 16384));

    StoredKey key;
    read_replies(
        redis, static_cast<size_t>(chunk),
        [&](const redisReply *reply) { use_reply(policy, cmd, key, reply); });
}

} // namespace throttle::fuzz
