// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/redis.hpp"

#include "throttle/crc16.hpp"

#include <hiredis/hiredis.h>

#include <cstring>

namespace throttle {

namespace {

bool
plain_key_byte(unsigned char c) noexcept
{
    // (strchr() finds a NUL too: the string's end)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || (c != '\0' && std::strchr("-_.:@/=+", c) != nullptr);
}

char *
append(char *p, std::string_view s) noexcept
{
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
}

char *
append_hex(char *p, const unsigned char *data, size_t len) noexcept
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        *p++ = digits[data[i] >> 4];
        *p++ = digits[data[i] & 0xf];
    }
    return p;
}

char *
append_decimal(char *p, unsigned n) noexcept
{
    if (n >= 10) {
        p = append_decimal(p, n / 10);
    }
    *p++ = static_cast<char>('0' + n % 10);
    return p;
}

// hiredis's functions that build replies, and a copy of them whose
// createArray refuses long arrays (the same every time a reader is made).
const redisReplyObjectFunctions *hiredis_functions;
redisReplyObjectFunctions        bounded_functions;

// A reader's privdata is the reader itself until it refuses an array:
// hiredis hands it to every task, and reports a refusal as out of memory.
void *
create_bounded_array(const redisReadTask *task, int elements) noexcept
{
    if (elements > kMaxReplyElements) {
        static_cast<redisReader *>(task->privdata)->privdata = nullptr;
        return nullptr;
    }
    return hiredis_functions->createArray(task, elements);
}

// The scripts compute in Lua's doubles, exact below 2^53, and return no
// number beyond: one that is is no script's, and the times it would be
// added to would overflow.
bool
script_number(long long value) noexcept
{
    constexpr long long kBound = 1LL << 53;
    return value > -kBound && value < kBound;
}

ScriptReply
malformed(std::string_view what) noexcept
{
    ScriptReply r;
    r.message = what;
    return r;
}

} // namespace

unsigned
async_shard(const ZoneKey &key) noexcept
{
    return crc16(key.data(), key.size()) % kAsyncShards;
}

size_t
format_redis_key(char *out, std::string_view prefix, std::string_view zone,
                 const ZoneKey &key, HashTag tag) noexcept
{
    char *p = append(out, prefix);

    if (tag == HashTag::shard) {
        *p++ = '{';
        p = append(p, zone);
        *p++ = ':';
        p = append_decimal(p, async_shard(key));
        p = append(p, "}:");
    } else {
        p = append(p, zone);
        p = append(p, ":{");
    }

    bool plain = !key.hashed();
    for (size_t i = 0; plain && i < key.size(); i++) {
        plain = plain_key_byte(key.data()[i]);
    }

    if (plain) {
        p = append(p, {reinterpret_cast<const char *>(key.data()), key.size()});
    } else {
        *p++ = key.hashed() ? '#' : '~';
        p = append_hex(p, key.data(), key.size());
    }

    if (tag == HashTag::key) {
        *p++ = '}';
    }

    return static_cast<size_t>(p - out);
}

redisReader *
open_reply_reader() noexcept
{
    redisReader *reader = redisReaderCreate();
    if (reader == nullptr) {
        return nullptr;
    }
    hiredis_functions = reader->fn;
    bounded_functions = *reader->fn;
    bounded_functions.createArray = create_bounded_array;
    reader->fn = &bounded_functions;
    reader->privdata = reader;
    return reader;
}

const char *
reply_reader_error(const redisReader *reader) noexcept
{
    return reader->privdata == nullptr
        ? "an array longer than any script's reply"
        : reader->errstr;
}

ScriptReply
decode_decision_reply(const redisReply *reply, size_t tokens) noexcept
{
    if (reply == nullptr) {
        return malformed("no reply");
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        return malformed({reply->str, reply->len});
    }

    const size_t n = 5 + tokens;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n || tokens > 2)
    {
        return malformed("unexpected reply to the throttle script: not an "
                         "array of the expected size");
    }

    long long v[7];
    bool      in_range = true;
    for (size_t i = 0; i < n; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            return malformed("unexpected reply to the throttle script: not "
                             "an integer");
        }
        v[i] = reply->element[i]->integer;
        in_range = in_range && script_number(v[i]);
    }

    // a retry time is -1 (passed, or never) or a time to wait
    if (!in_range || (v[0] != 0 && v[0] != 1) || v[1] < 1 || v[2] < 0
        || v[3] < 0 || v[4] < -1 || v[4] == 0 || (v[0] == 0 && v[4] != -1))
    {
        return malformed("unexpected reply to the throttle script: values "
                         "out of range");
    }

    ScriptReply r;
    r.ok = true;
    r.result.limited = v[0] == 1;
    r.result.limit = v[1];
    r.result.remaining = v[2];
    r.result.reset_after_us = v[3];
    r.result.retry_after_us = v[4];
    for (size_t i = 0; i < tokens; i++) {
        r.tokens[i] = v[5 + i];
    }
    return r;
}

const char *
decode_sync_reply(const redisReply *reply, size_t n, int64_t *values) noexcept
{
    if (reply == nullptr) {
        return "no reply";
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        return reply->str;
    }

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n) {
        return "unexpected reply to the sync script: wrong length";
    }

    for (size_t i = 0; i < n; i++) {
        const redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0
            || !script_number(e->integer))
        {
            return "unexpected reply to the sync script: not a count or a time";
        }
        values[i] = e->integer;
    }

    return nullptr;
}

} // namespace throttle
