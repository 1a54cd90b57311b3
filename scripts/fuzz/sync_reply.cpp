// SPDX-License-Identifier: BSD-2-Clause
// Async zones: the bytes Redis sends back for sync scripts, read as the
// transport reads them (its reader, fed what each recv() brings) and
// used as an async zone uses them: decode_sync_reply() for the call's
// layout, Policy::apply_sync() for each key, then the zone decides from
// the view Redis gave it; or, for a reply that is refused, the units the
// call took are kept for the next sync (Policy::merge_pending()).
//
// Setup line: "<algorithm> <rate> <burst> <sync_interval, ms> <keys>
// <round trip, us> <bytes per recv>", e.g. "fixed_window 10r/s 20 100 3
// 800 16384". Each reply is the answer to one round of the keys, and
// rounds follow one another by the sync interval.
#include "support.hpp"

#include <vector>

namespace throttle::fuzz {
namespace {

// A zone's keys through sync rounds: each key is charged, sent, charged
// again while the call is out, and then updated by the reply.
struct Round {
    const Policy             &policy;
    std::vector<StoredKey>    keys;
    std::vector<PendingUnits> taken;
    int64_t                   sent_at_us;
    int64_t                   replied_us;

    // A request that passes the zone is committed, as the glue does.
    void request(StoredKey &key, int64_t now, int64_t cost)
    {
        const bool live = key.expire_at_us > now;
        Decision   d = policy.decide(live ? &key : nullptr, nullptr, now, cost);
        check_local_decision(d, policy, cost, !live);
        if (!d.result.limited && d.store) {
            policy.commit(d, now, cost, key, nullptr);
            expect(policy.pending_total(key.pending) >= 0, "units >= 0");
        }
    }

    // Key i is charged i % 5 units before the call leaves and i % 3 while
    // it is out; the call takes what it was charged before.
    void send(size_t i)
    {
        StoredKey &key = keys[i];
        for (auto j = static_cast<int64_t>(i % 5); j > 0; j--) {
            request(key, sent_at_us - 1000 * j, 1);
        }
        taken[i] = key.pending;
        key.pending.units = 0;

        const SyncLayout layout = policy.sync_layout();
        int64_t          args[8];
        expect(layout.key_args <= 8, "a key's ARGV fits");
        policy.sync_key_args(taken[i], sent_at_us, args);
        for (size_t a = 0; a < layout.key_args; a++) {
            expect(args[a] >= 0, "a key's ARGV is counts and ages >= 0");
        }
        for (int64_t j = 0; j < static_cast<int64_t>(i % 3); j++) {
            request(key, sent_at_us + std::min(j, replied_us - sent_at_us), 1);
        }
    }

    // The reply to the call, and a request right after it.
    void receive(const redisReply *reply)
    {
        const SyncLayout     layout = policy.sync_layout();
        const size_t         n = keys.size();
        std::vector<int64_t> answer(layout.reply_head
                                    + n * layout.reply_per_key);
        const char          *error =
            decode_sync_reply(reply, answer.size(), answer.data());
        for (size_t i = 0; i < n; i++) {
            StoredKey &key = keys[i];
            if (error != nullptr) {
                key.pending = policy.merge_pending(taken[i], key.pending);
                expect(policy.pending_total(key.pending) >= 0, "units >= 0");
                continue;
            }
            policy.apply_sync(answer.data(),
                              answer.data() + layout.reply_head
                                  + i * layout.reply_per_key,
                              sent_at_us, replied_us, key);
            request(key, replied_us, 1);
        }
    }
};

} // namespace

void
fuzz_one(std::string_view input)
{
    std::string_view redis;
    SetupLine        setup = SetupLine::split(input, redis);
    ZoneParams       params = zone_params(setup, Mode::async);
    // sync_interval= is 10ms to 60s
    params.sync_interval_us =
        1000 * std::max<int64_t>(10, setup.count(60'000, 100));
    const Policy policy = accepted_policy(params);
    // a call carries up to NGX_HTTP_THROTTLE_ASYNC_BATCH keys
    const int64_t n = std::max<int64_t>(1, setup.count(500, 3));

    Round round{policy, std::vector<StoredKey>(static_cast<size_t>(n)),
                std::vector<PendingUnits>(static_cast<size_t>(n)), 0, 0};
    round.sent_at_us = send_time(policy);
    // at most the longest timeout= (2^31 - 1 ms)
    const int64_t rtt = setup.count(2'147'483'647'000, 800);
    const int64_t chunk = std::max<int64_t>(1, setup.count(16384, 16384));

    read_replies(
        redis, static_cast<size_t>(chunk), [&](const redisReply *reply) {
            round.replied_us = round.sent_at_us + rtt;
            for (size_t i = 0; i < round.keys.size(); i++) {
                round.send(i);
            }
            round.receive(reply);
            // the next round
            round.sent_at_us = round.replied_us + policy.sync_interval_us;
        });
}

} // namespace throttle::fuzz
