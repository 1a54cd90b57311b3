// SPDX-License-Identifier: BSD-2-Clause
// How a request's key is held in a zone. Keys are compared as bytes
// (binary-safe: $binary_remote_addr, arbitrary header values).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace throttle {

// Keys up to this length are stored as they are. A longer key is stored as
// its SHA-256 digest: a client sending a 64 KiB header then costs a zone
// 32 bytes, not 64 KiB, and two long keys share state only if SHA-256
// collides.
constexpr size_t kMaxInlineKeyLen = 255;
constexpr size_t kKeyDigestLen = 32;

class ZoneKey {
  public:
    ZoneKey() noexcept : raw_(nullptr), len_(0), hashed_(false) {}
    ZoneKey(const unsigned char *data, size_t len) noexcept;

    // A key as a zone stores it: its digest when "hashed".
    static ZoneKey stored(const unsigned char *data, size_t len,
                          bool hashed) noexcept;

    const unsigned char *data() const noexcept
    {
        return hashed_ ? digest_.data() : raw_;
    }
    size_t size() const noexcept { return hashed_ ? kKeyDigestLen : len_; }
    // A digest and a raw key of the same bytes are different keys.
    bool hashed() const noexcept { return hashed_; }

  private:
    const unsigned char                     *raw_;
    size_t                                   len_;
    bool                                     hashed_;
    std::array<unsigned char, kKeyDigestLen> digest_{};
};

} // namespace throttle
