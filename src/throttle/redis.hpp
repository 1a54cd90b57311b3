// What the core knows of Redis: how a zone's key is named there, and how a
// script's reply is read back. The transport (nginx connections, TLS,
// timeouts) is glue; hiredis is only the RESP codec.
#pragma once

#include "throttle/key.hpp"
#include "throttle/result.hpp"

#include <cstddef>
#include <string_view>

struct redisReply;

namespace throttle {

// Room for the longest name format_redis_key() can write.
constexpr size_t
max_redis_key_len(size_t prefix_len, size_t zone_len) noexcept
{
    return prefix_len + zone_len + 3 + 1 + 2 * kMaxInlineKeyLen;
}

// "<prefix><zone>:{<key>}". The key is the hash tag, so a zone's scripts
// touch one slot of a Redis Cluster. It is written as it is when made of
// [A-Za-z0-9] and "-_.:@/=+"; otherwise as "~" and its hex digits, or as
// "#" and the hex digits of its digest for a long key. Neither marker can
// start a plain key, so distinct keys keep distinct names, and no "{" or
// "}" in a key can move the hash tag.
size_t format_redis_key(char *out, std::string_view prefix,
                        std::string_view zone, const ZoneKey &key) noexcept;

struct ScriptReply {
    enum Kind { ok, noscript, error } kind = error;
    ThrottleResult result;
    // for errors: Redis's message (pointing into the reply), or what was
    // wrong with the reply
    std::string_view message;
};

// Reads gcra.lua's reply: {limited, limit, remaining, reset_after_us,
// retry_after_us}. Anything else is an error, never a decision.
ScriptReply decode_gcra_reply(const redisReply *reply) noexcept;

} // namespace throttle
