// SPDX-License-Identifier: BSD-2-Clause
// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit hash. A zone
// keeps a key's SipHash under the zone's secret instead of the key: a
// client who does not know the secret cannot make two keys that hash
// alike, as it could with an unkeyed hash.
#pragma once

#include <cstddef>
#include <cstdint>

namespace throttle {

// The 128-bit key, as the reference reads its 16 bytes: two little-endian
// words.
struct SipKey {
    uint64_t k0 = 0;
    uint64_t k1 = 0;
};

uint64_t siphash24(const SipKey &key, const unsigned char *data,
                   size_t len) noexcept;

} // namespace throttle
