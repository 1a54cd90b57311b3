// SPDX-License-Identifier: BSD-2-Clause
#include "policy_support.hpp"
#include "throttle/headers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace throttle {
namespace {

std::string
policy_value(std::string_view name, const Policy &p)
{
    std::vector<char> buf(max_header_value_len(name.size()));
    return {buf.data(), format_ratelimit_policy(buf.data(), name, p)};
}

std::string
ratelimit_value(std::string_view name, const ThrottleResult &r,
                const Policy &p = Policy{})
{
    std::vector<char> buf(max_header_value_len(name.size()));
    return {buf.data(), format_ratelimit(buf.data(), name, p, r)};
}

TEST(Headers, DesignExample)
{
    auto p = testing_support::try_policy("gcra", 30, 60'000'000, 15);
    ASSERT_TRUE(p);
    EXPECT_EQ(policy_value("reply", *p.value), "\"reply\";q=16;w=32");
    ThrottleResult r;
    r.limit = 16;
    r.remaining = 15;
    r.reset_after_us = 2'000'000;
    EXPECT_EQ(ratelimit_value("reply", r), "\"reply\";r=15;t=2");
}

// Places come back when requests end, not with time: no w, no t.
TEST(Headers, AConcurrentZoneSaysItsPlacesOnly)
{
    const Policy p = testing_support::concurrent_policy(3);
    EXPECT_EQ(policy_value("streams", p), "\"streams\";q=3");
    ThrottleResult r;
    r.limit = 3;
    r.remaining = 2;
    EXPECT_EQ(ratelimit_value("streams", r, p), "\"streams\";r=2");
}

TEST(Headers, MillisecondsRoundUp)
{
    EXPECT_EQ(ceil_millis(-1), 0);
    EXPECT_EQ(ceil_millis(0), 0);
    EXPECT_EQ(ceil_millis(1), 1);
    EXPECT_EQ(ceil_millis(999), 1);
    EXPECT_EQ(ceil_millis(1'000), 1);
    EXPECT_EQ(ceil_millis(1'001), 2);
    EXPECT_EQ(ceil_millis(INT64_MAX), INT64_MAX / 1'000 + 1);
}

TEST(Headers, SecondsRoundUp)
{
    EXPECT_EQ(ceil_seconds(-1), 0);
    EXPECT_EQ(ceil_seconds(0), 0);
    EXPECT_EQ(ceil_seconds(1), 1);
    EXPECT_EQ(ceil_seconds(999'999), 1);
    EXPECT_EQ(ceil_seconds(1'000'000), 1);
    EXPECT_EQ(ceil_seconds(1'000'001), 2);
    ThrottleResult r;
    r.reset_after_us = 1'500'000;
    EXPECT_EQ(ratelimit_value("a", r), "\"a\";r=0;t=2");
    // a window of 5 x 333333 us is 1.666665 s
    auto p = testing_support::try_policy("gcra", 3, 1'000'000, 4);
    EXPECT_EQ(policy_value("a", *p.value), "\"a\";q=5;w=2");
}

TEST(Headers, LongestValueFits)
{
    std::string    name(100, 'z');
    ThrottleResult r;
    r.remaining = INT64_MAX;
    r.reset_after_us = INT64_MAX;
    EXPECT_LE(ratelimit_value(name, r).size(), max_header_value_len(100));
    char buf[20];
    EXPECT_EQ(format_int(buf, INT64_MAX), 19u);
    EXPECT_EQ(format_int(buf, -5), 1u);
}

TEST(Headers, ZoneNames)
{
    for (const char *ok : {"reply", "api-v2", "a.b_c", "Z9"}) {
        EXPECT_TRUE(valid_zone_name(ok)) << ok;
    }
    for (const char *bad :
         {"", "a b", "a\"b", "a\\b", "a;b", "a,b", "a:b", "\xc3\xa9"})
    {
        EXPECT_FALSE(valid_zone_name(bad)) << bad;
    }
}

} // namespace
} // namespace throttle
