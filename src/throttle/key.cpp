// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/key.hpp"

#include <openssl/sha.h>

#include <cstring>

namespace throttle {

ZoneKey::ZoneKey(const unsigned char *data, size_t len) noexcept
    : raw_(data), len_(len), hashed_(len > kMaxInlineKeyLen)
{
    if (hashed_) {
        SHA256(data, len, digest_.data());
    }
}

ZoneKey
ZoneKey::stored(const unsigned char *data, size_t len, bool hashed) noexcept
{
    ZoneKey key;
    if (hashed && len == kKeyDigestLen) {
        key.hashed_ = true;
        std::memcpy(key.digest_.data(), data, kKeyDigestLen);
    } else {
        key.raw_ = data;
        key.len_ = len;
    }
    return key;
}

} // namespace throttle
