// SPDX-License-Identifier: BSD-2-Clause
// format_redis_key(): a request's key (any bytes a client sends) named in
// Redis. Input: a byte whose low bit picks the hash tag (key or shard), a
// byte for the prefix's length, one for the zone name's, then the prefix,
// the zone name and the key.
//
// The name fits max_redis_key_len(); it is the prefix, then the zone and
// the key as the hash tag puts them; Redis Cluster's hash tag (the text
// between the first "{" and the next "}") is the key's part or the zone
// and the key's shard, whatever the key holds; and the key's part reads back as
// the key (its bytes, or its digest for a long key), so distinct keys get
// distinct names. A key as a zone stores it (ZoneKey::stored) gets the same
// name.
#include "support.hpp"

#include "throttle/key.hpp"
#include "throttle/redis.hpp"

#include <openssl/sha.h>

#include <string>
#include <vector>

namespace throttle::fuzz {
namespace {

// Redis Cluster's hash tag of a name, if it has one.
std::optional<std::string_view>
hash_tag(std::string_view name)
{
    const size_t open = name.find('{');
    const size_t close = name.find('}', open + 1);
    if (open == std::string_view::npos || close == std::string_view::npos
        || close == open + 1)
    {
        return std::nullopt;
    }
    return name.substr(open + 1, close - open - 1);
}

bool
plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9')
        || std::string_view("-_.:@/=+").find(static_cast<char>(c))
        != std::string_view::npos;
}

// The bytes a key's part stands for: itself, or its hex after "~" or "#".
std::string
unhex(std::string_view hex)
{
    std::string bytes;
    expect(hex.size() % 2 == 0, "hex digits come in pairs");
    for (size_t i = 0; i < hex.size(); i += 2) {
        const std::string_view pair = hex.substr(i, 2);
        expect(pair.find_first_not_of("0123456789abcdef")
                   == std::string_view::npos,
               "hex digits are lowercase hex");
        bytes += static_cast<char>(std::stoi(std::string(pair), nullptr, 16));
    }
    return bytes;
}

void
check_key_part(std::string_view part, std::string_view key)
{
    expect(!part.empty(), "a key's part is not empty");
    if (part[0] == '#') {
        unsigned char digest[SHA256_DIGEST_LENGTH];
        SHA256(reinterpret_cast<const unsigned char *>(key.data()), key.size(),
               digest);
        expect(key.size() > kMaxInlineKeyLen, "only long keys are digests");
        expect(unhex(part.substr(1))
                   == std::string(reinterpret_cast<char *>(digest),
                                  sizeof(digest)),
               "a long key's part is its SHA-256");
    } else if (part[0] == '~') {
        expect(unhex(part.substr(1)) == key, "a hex part reads as the key");
    } else {
        for (char c : part) {
            expect(plain(static_cast<unsigned char>(c)),
                   "a plain part is of the plain alphabet");
        }
        expect(part == key, "a plain part is the key");
    }
}

std::string
name_of(std::string_view prefix, std::string_view zone, const ZoneKey &key,
        HashTag tag)
{
    std::vector<char> out(max_redis_key_len(prefix.size(), zone.size()));
    const size_t      n = format_redis_key(out.data(), prefix, zone, key, tag);
    expect(n <= out.size(), "the name fits max_redis_key_len()");
    return {out.data(), n};
}

// The name's parts: the prefix, the zone (and the key's shard), the key's
// part (closed when the key is the hash tag), of which the key's reads back
// as the key.
void
check_name(std::string_view name, std::string_view prefix,
           std::string_view zone, const ZoneKey &zone_key, std::string_view key,
           HashTag tag)
{
    expect(name.substr(0, prefix.size()) == prefix,
           "the name starts with the prefix");
    const unsigned shard = async_shard(zone_key);
    expect(shard < kAsyncShards, "a shard is below kAsyncShards");
    const std::string shard_tag =
        std::string(zone) + ":" + std::to_string(shard);
    const std::string zone_part =
        tag == HashTag::key ? std::string(zone) + ":{" : "{" + shard_tag + "}:";
    const std::string_view rest = name.substr(prefix.size());
    expect(rest.substr(0, zone_part.size()) == zone_part,
           "the zone follows the prefix");
    std::string_view key_part = rest.substr(zone_part.size());
    if (tag == HashTag::key) {
        expect(!key_part.empty() && key_part.back() == '}',
               "the key's part is closed");
        key_part.remove_suffix(1);
    }
    check_key_part(key_part, key);

    // the prefix is the operator's: a brace in it is theirs to place
    if (prefix.find_first_of("{}") == std::string_view::npos) {
        expect(hash_tag(name) == (tag == HashTag::key ? key_part : shard_tag),
               "the hash tag is the key's part or the zone and shard");
    }
}

} // namespace

void
fuzz_one(std::string_view input)
{
    if (input.size() < 3) {
        return;
    }
    const HashTag tag = input[0] & 1 ? HashTag::shard : HashTag::key;
    const size_t  prefix_len = static_cast<unsigned char>(input[1]);
    const size_t  zone_len = static_cast<unsigned char>(input[2]);
    if (input.size() < 3 + prefix_len + zone_len) {
        return;
    }
    const std::string_view prefix = input.substr(3, prefix_len);
    const std::string_view zone = input.substr(3 + prefix_len, zone_len);
    const std::string_view key = input.substr(3 + prefix_len + zone_len);
    // nginx -t refuses other zone names; an empty key is not limited
    if (!valid_zone_name(zone) || key.empty()) {
        return;
    }

    const ZoneKey zone_key(reinterpret_cast<const unsigned char *>(key.data()),
                           key.size());
    const std::string name = name_of(prefix, zone, zone_key, tag);
    const ZoneKey     stored =
        ZoneKey::stored(zone_key.data(), zone_key.size(), zone_key.hashed());
    expect(name_of(prefix, zone, stored, tag) == name,
           "a key as a zone stores it has the same name");
    check_name(name, prefix, zone, zone_key, key, tag);
}

} // namespace throttle::fuzz
