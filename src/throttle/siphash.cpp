// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/siphash.hpp"

namespace throttle {

namespace {

constexpr uint64_t
rotl(uint64_t x, int b) noexcept
{
    return (x << b) | (x >> (64 - b));
}

struct SipState {
    uint64_t v0, v1, v2, v3;

    void round() noexcept
    {
        v0 += v1;
        v1 = rotl(v1, 13);
        v1 ^= v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotl(v1, 17);
        v1 ^= v2;
        v2 = rotl(v2, 32);
    }

    // c = 2 rounds per message word
    void absorb(uint64_t m) noexcept
    {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
};

// Little-endian whatever the host: the reference's byte order.
uint64_t
load_le(const unsigned char *p, size_t n) noexcept
{
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) {
        w |= static_cast<uint64_t>(p[i]) << (8 * i);
    }
    return w;
}

} // namespace

uint64_t
siphash24(const SipKey &key, const unsigned char *data, size_t len) noexcept
{
    SipState s{key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL,
               key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};

    const size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        s.absorb(load_le(data + i, 8));
    }

    // the last block: the bytes left, and the length's low byte on top
    s.absorb(load_le(data + whole, len - whole)
             | (static_cast<uint64_t>(len) << 56));

    // d = 4 finalization rounds
    s.v2 ^= 0xff;
    s.round();
    s.round();
    s.round();
    s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

} // namespace throttle
