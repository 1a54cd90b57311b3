// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/parse.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace throttle {
namespace {

TEST(ParseRate, Units)
{
    struct {
        const char *text;
        int64_t     count, period_us;
    } cases[] = {
        {"1r/s", 1, 1'000'000},
        {"30r/m", 30, 60'000'000},
        {"5r/h", 5, 3'600'000'000},
        {"100r/d", 100, 86'400'000'000},
        {"1000000r/s", 1'000'000, 1'000'000},
    };
    for (auto &c : cases) {
        auto r = parse_rate(c.text);
        ASSERT_TRUE(r) << c.text << ": " << r.error;
        EXPECT_EQ(r.value->count, c.count) << c.text;
        EXPECT_EQ(r.value->period_us, c.period_us) << c.text;
    }
}

TEST(ParseRate, Refusals)
{
    for (const char *bad : {"", "r/s", "0r/s", "10", "10r", "10r/", "10r/x",
                            "10r/ms", "-1r/s", "1.5r/s", "10 r/s", "2000000r/s",
                            "99999999999999999999r/s", "10R/s", "10r/sec"})
    {
        auto r = parse_rate(bad);
        EXPECT_FALSE(r) << bad;
        EXPECT_NE(r.error, nullptr) << bad;
    }
}

TEST(ParseCount, Bounds)
{
    EXPECT_EQ(*parse_count("0", 10).value, 0);
    EXPECT_EQ(*parse_count("10", 10).value, 10);
    EXPECT_FALSE(parse_count("11", 10));
    EXPECT_FALSE(parse_count("", 10));
    EXPECT_FALSE(parse_count("-1", 10));
    EXPECT_FALSE(parse_count("+1", 10));
    EXPECT_FALSE(parse_count("1x", 10));
    EXPECT_FALSE(parse_count(" 1", 10));
    EXPECT_FALSE(parse_count("99999999999999999999999", INT64_MAX));
}

TEST(RateText, AsParseRateReadsIt)
{
    for (const char *text : {"1r/s", "30r/m", "5r/h", "100r/d", "1000000r/s"}) {
        EXPECT_STREQ(RateText(*parse_rate(text).value).text, text);
    }
}

TEST(Message, Formats)
{
    Message m;
    EXPECT_STREQ(m.format("%s=%d", "a", 1).text(), "a=1");
    std::string long_text(1000, 'x');
    EXPECT_LT(std::strlen(m.format("%s", long_text.c_str()).text()), 1000u);
}

} // namespace
} // namespace throttle
