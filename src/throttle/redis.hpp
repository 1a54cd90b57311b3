// SPDX-License-Identifier: BSD-2-Clause
// What the core knows of Redis: how a zone's key is named there, and how a
// script's reply is read back. The transport (nginx connections, TLS,
// timeouts) is glue; hiredis is only the RESP codec.
#pragma once

#include "throttle/key.hpp"
#include "throttle/result.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

struct redisReader;
struct redisReply;

namespace throttle {

// How many hash-tag shards an async zone's keys are spread over.
constexpr unsigned kAsyncShards = 16;

// The shard of an async zone a key belongs to: the CRC16 of Redis Cluster
// (as key_slot() computes it) of the key's bytes as a zone stores them
// (key.data(), key.size()), modulo kAsyncShards.
unsigned async_shard(const ZoneKey &key) noexcept;

// Room for the longest name format_redis_key() can write: the prefix, the
// zone, "{", "}" and ":" around them, ":" and the digits of the largest
// shard, the key's marker and its bytes in hex.
constexpr size_t kMaxAsyncShardDigits = 2;
static_assert(kAsyncShards <= 100, "a shard's number has at most 2 digits");

constexpr size_t
max_redis_key_len(size_t prefix_len, size_t zone_len) noexcept
{
    return prefix_len + zone_len + 3 + 1 + kMaxAsyncShardDigits + 1
        + 2 * kMaxInlineKeyLen;
}

// Which part of a key's name is its hash tag, so that every script touches
// one slot of a Redis Cluster. Strict mode tags the key, spreading a zone's
// keys over the cluster. Async mode tags the zone and one of kAsyncShards
// shards of its keys: one script call can still sync many keys at once
// (those of one shard), while a busy zone's keys spread over up to
// kAsyncShards slots, so that one zone is not the whole load of one
// cluster node.
enum class HashTag { key, shard };

// "<prefix><zone>:{<key>}" (HashTag::key) or "<prefix>{<zone>:<n>}:<key>"
// (HashTag::shard, n = async_shard(key) in decimal). The key is written as
// it is when made of [A-Za-z0-9] and "-_.:@/=+"; otherwise as "~" and its
// hex digits, or as "#" and the hex digits of its digest for a long key.
// Neither marker can start a plain key, so distinct keys keep distinct
// names, and no "{" or "}" in a key can move the hash tag.
size_t format_redis_key(char *out, std::string_view prefix,
                        std::string_view zone, const ZoneKey &key,
                        HashTag tag = HashTag::key) noexcept;

// The longest array a reply may hold: far more than any script returns (a
// sync of 500 keys answers 1001 integers).
constexpr int kMaxReplyElements = 65536;

// hiredis's RESP reader, for the transport to read replies with, but for
// arrays longer than kMaxReplyElements, which it refuses: hiredis would
// allocate room for as many elements as a reply's first line announces
// ("*2000000000": 16 GiB) and, dropping the reply, visit each (seconds of
// a worker's time). Null if out of memory; redisReaderFree() frees it.
redisReader *open_reply_reader() noexcept;

// Why redisReaderGetReply() failed on a reader open_reply_reader() made.
const char *reply_reader_error(const redisReader *reader) noexcept;

// A decision script's reply, read.
struct ScriptReply {
    bool           ok = false;
    ThrottleResult result;
    // what identifies the charge, for a refund
    int64_t tokens[2] = {0, 0};
    // if not ok: Redis's error (pointing into the reply), or what was wrong
    // with the reply
    std::string_view message;
};

// Reads a strict script's reply: {limited, limit, remaining,
// reset_after_us, retry_after_us} followed by `tokens` integers (at most
// 2), each within the scripts' range (below 2^53 in magnitude). Anything
// else is an error, never a decision.
ScriptReply decode_decision_reply(const redisReply *reply,
                                  size_t            tokens) noexcept;

// Reads a sync script's reply of n integers in [0, 2^53) into values[0..n):
// null on success, else what was wrong (Redis's message points into the
// reply).
const char *decode_sync_reply(const redisReply *reply, size_t n,
                              int64_t *values) noexcept;

} // namespace throttle
