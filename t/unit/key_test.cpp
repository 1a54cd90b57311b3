// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/key.hpp"

#include <gtest/gtest.h>

#include <string>

namespace throttle {
namespace {

const unsigned char *
bytes(const std::string &s)
{
    return reinterpret_cast<const unsigned char *>(s.data());
}

TEST(ZoneKey, ShortKeysAreStoredAsTheyAre)
{
    const std::string binary("\x7f\x00\x00\x01", 4); // $binary_remote_addr
    ZoneKey           k(bytes(binary), binary.size());
    EXPECT_FALSE(k.hashed());
    EXPECT_EQ(k.size(), 4u);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(k.data()), k.size()),
              binary);

    const std::string longest(kMaxInlineKeyLen, 'k');
    EXPECT_FALSE(ZoneKey(bytes(longest), longest.size()).hashed());
}

TEST(ZoneKey, LongKeysBecomeDistinctDigests)
{
    const std::string a(64 * 1024, 'a');
    std::string       b = a;
    b.back() = 'b';
    ZoneKey ka(bytes(a), a.size()), kb(bytes(b), b.size()),
        ka2(bytes(a), a.size());
    EXPECT_TRUE(ka.hashed());
    EXPECT_EQ(ka.size(), kKeyDigestLen);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(ka.data()), 32),
              std::string(reinterpret_cast<const char *>(ka2.data()), 32));
    EXPECT_NE(std::string(reinterpret_cast<const char *>(ka.data()), 32),
              std::string(reinterpret_cast<const char *>(kb.data()), 32));
    // One byte past the inline limit is already hashed.
    const std::string edge(kMaxInlineKeyLen + 1, 'k');
    EXPECT_TRUE(ZoneKey(bytes(edge), edge.size()).hashed());
}

TEST(ZoneKey, CopiesKeepPointingAtTheirOwnDigest)
{
    const std::string a(1000, 'x');
    ZoneKey           k(bytes(a), a.size());
    ZoneKey           copy = k;
    EXPECT_NE(copy.data(), k.data());
    EXPECT_EQ(0, memcmp(copy.data(), k.data(), kKeyDigestLen));
}

TEST(ZoneKey, StoredFormRoundTrips)
{
    const std::string a(1000, 'x');
    ZoneKey           k(bytes(a), a.size());
    ZoneKey           back = ZoneKey::stored(k.data(), k.size(), k.hashed());
    EXPECT_TRUE(back.hashed());
    EXPECT_EQ(0, memcmp(back.data(), k.data(), kKeyDigestLen));

    const std::string s("alice");
    ZoneKey           raw = ZoneKey::stored(bytes(s), s.size(), false);
    EXPECT_FALSE(raw.hashed());
    EXPECT_EQ(raw.size(), 5u);
    EXPECT_EQ(raw.data(), bytes(s));
}

} // namespace
} // namespace throttle
