// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/siphash.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace throttle {
namespace {

// The reference's vectors (Aumasson and Bernstein's vectors.h, SipHash-2-4
// with 64-bit output): key 00 01 .. 0f, message 00 01 .. (len - 1), the
// output's bytes read little-endian.
constexpr uint64_t kVectors[] = {
    0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a,
    0x85676696d7fb7e2d, 0xcf2794e0277187b7, 0x18765564cd99a68d,
    0xcbc9466e58fee3ce, 0xab0200f58b01d137, 0x93f5f5799a932462,
    0x9e0082df0ba9e4b0, 0x7a5dbbc594ddb9f3, 0xf4b32f46226bada7,
    0x751e8fbc860ee5fb, 0x14ea5627c0843d90, 0xf723ca908e7af2ee,
    0xa129ca6149be45e5,
};

TEST(SipHash24, ReferenceVectors)
{
    const SipKey  key{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
    unsigned char msg[16];
    for (unsigned i = 0; i < sizeof msg; i++) {
        msg[i] = static_cast<unsigned char>(i);
    }
    for (size_t len = 0; len < sizeof kVectors / sizeof kVectors[0]; len++) {
        EXPECT_EQ(siphash24(key, msg, len), kVectors[len]) << "len " << len;
    }
}

TEST(SipHash24, TheKeyChangesEverything)
{
    const unsigned char msg[] = "203.0.113.7";
    const uint64_t      a = siphash24({1, 2}, msg, sizeof msg - 1);
    EXPECT_NE(a, siphash24({1, 3}, msg, sizeof msg - 1));
    EXPECT_NE(a, siphash24({3, 2}, msg, sizeof msg - 1));
    EXPECT_EQ(a, siphash24({1, 2}, msg, sizeof msg - 1));
}

} // namespace
} // namespace throttle
