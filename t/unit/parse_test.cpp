#include "throttle/parse.hpp"
#include "throttle/policy.hpp"

#include <gtest/gtest.h>

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

TEST(Policy, AlgorithmNames)
{
    EXPECT_EQ(*parse_algorithm("gcra").value, Algorithm::gcra);
    EXPECT_EQ(algorithm_name(Algorithm::gcra), "gcra");
    for (const char *later : {"fixed_window", "sliding_window", "sliding_log"})
    {
        auto a = parse_algorithm(later);
        EXPECT_FALSE(a);
        EXPECT_NE(std::string(a.error).find("not available"),
                  std::string::npos);
    }
    EXPECT_FALSE(parse_algorithm("token_bucket"));
}

TEST(Policy, DerivedParameters)
{
    auto p = make_policy(Algorithm::gcra, Rate{3, 1'000'000}, 2);
    ASSERT_TRUE(p);
    EXPECT_EQ(p.value->gcra.emission_interval_us, 333'333);
    EXPECT_EQ(p.value->gcra.tolerance_us, 999'999);
    EXPECT_EQ(p.value->limit(), 3);
}

TEST(Policy, RefusesToleranceThatWouldOverflow)
{
    EXPECT_FALSE(
        make_policy(Algorithm::gcra, Rate{1, 86'400'000'000}, kMaxBurst));
    EXPECT_FALSE(make_policy(Algorithm::gcra, Rate{1, 1'000'000}, -1));
    EXPECT_TRUE(make_policy(Algorithm::gcra, Rate{1, 86'400'000'000}, 10'000));
    EXPECT_FALSE(
        make_policy(Algorithm::gcra, Rate{1, 86'400'000'000}, 1'000'000));
}

} // namespace
} // namespace throttle
