// What the core knows of Redis: how a zone's key is named there, and how a
// script's reply is read back. The transport (nginx connections, TLS,
// timeouts) is glue; hiredis is only the RESP codec.
#pragma once

#include "throttle/key.hpp"
#include "throttle/policy.hpp"
#include "throttle/result.hpp"
#include "throttle/scripts.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

struct redisReply;

namespace throttle {

// Room for the longest name format_redis_key() can write.
constexpr size_t
max_redis_key_len(size_t prefix_len, size_t zone_len) noexcept
{
    return prefix_len + zone_len + 3 + 1 + 2 * kMaxInlineKeyLen;
}

// Which part of a key's name is its hash tag, so that every script touches
// one slot of a Redis Cluster. Strict mode tags the key, spreading a zone's
// keys over the cluster; async mode tags the zone, so one script can sync
// many keys of a zone at once.
enum class HashTag { key, zone };

// "<prefix><zone>:{<key>}" (HashTag::key) or "<prefix>{<zone>}:<key>"
// (HashTag::zone). The key is written as it is when made of [A-Za-z0-9]
// and "-_.:@/=+"; otherwise as "~" and its hex digits, or as "#" and the
// hex digits of its digest for a long key. Neither marker can start a
// plain key, so distinct keys keep distinct names, and no "{" or "}" in a
// key can move the hash tag.
size_t format_redis_key(char *out, std::string_view prefix,
                        std::string_view zone, const ZoneKey &key,
                        HashTag tag = HashTag::key) noexcept;

struct ScriptReply {
    enum Kind { ok, noscript, error } kind = error;
    ThrottleResult result;
    // what identifies the charge, for a refund (see strict_scripts())
    int64_t tokens[2] = {0, 0};
    // for errors: Redis's message (pointing into the reply), or what was
    // wrong with the reply
    std::string_view message;
};

// Reads a strict script's reply: {limited, limit, remaining,
// reset_after_us, retry_after_us} followed by `tokens` integers. Anything
// else is an error, never a decision.
ScriptReply decode_decision_reply(const redisReply *reply,
                                  size_t            tokens = 0) noexcept;

// The scripts of a strict zone: the one that decides, the one that gives
// back a charge (for a request another zone rejected), and how many
// integers the first returns after the result to identify the charge.
struct StrictScripts {
    ScriptId decide;
    ScriptId refund;
    size_t   tokens;
};

StrictScripts strict_scripts(Algorithm algorithm) noexcept;

// A script's ARGV, as integers: at most 4.
struct ScriptArgs {
    int64_t values[4] = {0, 0, 0, 0};
    size_t  n = 0;
};

// The decision script's ARGV: GCRA's T, DVT, limit and cost, or a window's
// length, limit and cost (see src/scripts/).
ScriptArgs strict_args(const Policy &policy, int64_t cost) noexcept;

// The refund script's ARGV for a charge of `cost` that the decision
// identified by `tokens` (see strict_scripts()).
ScriptArgs refund_args(const Policy &policy, int64_t cost,
                       const int64_t tokens[2]) noexcept;

// Reads a sync script's reply of n non-negative integers into ttls[0..n): null
// on success, else what was wrong (Redis's message points into the reply).
const char *decode_sync_reply(const redisReply *reply, size_t n,
                              int64_t *ttls) noexcept;

// Async mode: a key's TAT in this node's clock after a sync. Redis said the
// TAT was "global_ttl_us" ahead of its clock when it ran the batch sent at
// "sent_at_us"; the node has charged "pending_units" more since.
constexpr int64_t
synced_tat(int64_t sent_at_us, int64_t global_ttl_us,
           int64_t emission_interval_us, int64_t pending_units) noexcept
{
    return sent_at_us + global_ttl_us + emission_interval_us * pending_units;
}

} // namespace throttle
