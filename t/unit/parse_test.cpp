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
    for (Algorithm a : {Algorithm::gcra, Algorithm::fixed_window,
                        Algorithm::sliding_window, Algorithm::sliding_log})
    {
        auto parsed = parse_algorithm(algorithm_name(a));
        ASSERT_TRUE(parsed) << algorithm_name(a);
        EXPECT_EQ(*parsed.value, a);
    }
    EXPECT_EQ(algorithm_name(Algorithm::sliding_log), "sliding_log");
    // the meters of the seeds are GCRA: no second name for them
    for (const char *other : {"token_bucket", "leaky_bucket", "GCRA", ""}) {
        auto a = parse_algorithm(other);
        EXPECT_FALSE(a) << other;
        EXPECT_NE(std::string(a.error).find("unknown"), std::string::npos);
    }
}

TEST(Policy, WindowParameters)
{
    auto p = make_policy(Algorithm::fixed_window, Rate{30, 60'000'000}, 5);
    ASSERT_TRUE(p);
    EXPECT_EQ(p.value->window.window_us, 60'000'000);
    EXPECT_EQ(p.value->limit(), 35);
    EXPECT_EQ(p.value->window_us(), 60'000'000);
    EXPECT_TRUE(p.value->wall_clock());
    EXPECT_EQ(p.value->log_slots(), 0);

    auto g = make_policy(Algorithm::gcra, Rate{30, 60'000'000}, 5);
    ASSERT_TRUE(g);
    EXPECT_FALSE(g.value->wall_clock());
    EXPECT_EQ(g.value->limit(), 6);

    // a log keeps a timestamp per unit of its limit, up to log_max
    auto l = make_policy(Algorithm::sliding_log, Rate{1000, 1'000'000}, 0);
    ASSERT_TRUE(l);
    EXPECT_EQ(l.value->log_slots(), 1000);
    EXPECT_FALSE(make_policy(Algorithm::sliding_log, Rate{1000, 1'000'000}, 1));
    EXPECT_TRUE(
        make_policy(Algorithm::sliding_log, Rate{1000, 1'000'000}, 1, 1001));
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
