#include "throttle/key.hpp"

#include <openssl/sha.h>

namespace throttle {

ZoneKey::ZoneKey(const unsigned char *data, size_t len) noexcept
    : raw_(data), len_(len), hashed_(len > kMaxInlineKeyLen)
{
    if (hashed_) {
        SHA256(data, len, digest_.data());
    }
}

} // namespace throttle
