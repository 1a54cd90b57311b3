// SPDX-License-Identifier: BSD-2-Clause
// throttle_api's reservations: the text a decision gives for a charge, read
// back by a settle call (throttle::parse_reservation()), and what a settle
// charges with one or without.
#include "throttle/policy.hpp"
#include "throttle/reservation.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <string>

namespace throttle {
namespace {

std::string
text_of(const Reservation &r)
{
    char   buf[kReservationTextMax + 1];
    size_t n = format_reservation(r, buf);
    return std::string(buf, n);
}

TEST(Reservation, ReadsBackWhatItWrites)
{
    const Reservation cases[] = {
        {1, 0, {0, 0}},
        {5, 1'764'000'000'123'456, {0, 0}},
        {kMaxCost, INT64_MAX, {INT64_MIN, INT64_MAX}},
        {3, 42, {-7, 1'764'000'000'000'000}},
    };
    for (const Reservation &r : cases) {
        const std::string text = text_of(r);
        auto              read = parse_reservation(text);
        ASSERT_TRUE(read) << text << ": " << read.error;
        EXPECT_EQ(read.value->cost_units, r.cost_units) << text;
        EXPECT_EQ(read.value->at_us, r.at_us) << text;
        EXPECT_EQ(read.value->tokens[0], r.tokens[0]) << text;
        EXPECT_EQ(read.value->tokens[1], r.tokens[1]) << text;
    }
}

TEST(Reservation, TheFormatIsVersionedAndSmall)
{
    EXPECT_EQ(text_of({2, 1500, {-1, 9}}), "1.2.1500.-1.9");
    EXPECT_EQ(text_of({1, 0, {0, 0}}), "1.1.0.0.0");
    // the longest fits the bound exactly
    EXPECT_EQ(text_of({kMaxCost, INT64_MAX, {INT64_MIN, INT64_MIN}}).size(),
              kReservationTextMax);
}

TEST(Reservation, RefusesAnyOtherText)
{
    const char *cases[] = {
        "",
        "1",
        "1.",
        "2.1.0.0.0",                    // another version
        "1.1.0.0",                      // a field short
        "1.1.0.0.0.0",                  // one too many
        "1.1.0.0.",                     // an empty field
        "1..0.0.0",                     //
        "1.0.0.0.0",                    // nothing was reserved
        "1.1000000001.0.0.0",           // above kMaxCost
        "1.-1.0.0.0",                   // negative cost
        "1.1.-5.0.0",                   // a time before the clock's start
        "1.1.0.+3.0",                   // a sign other than '-'
        "1.1.0.-.0",                    //
        "1.1.0.0x1.0",                  //
        "1.1.0. 1.0",                   //
        "1.1.0.0.9223372036854775808",  // beyond int64
        "1.1.0.0.-9223372036854775809", //
        "1.1.0.0.00000000000000000001", // 20 digits
        "1.1.0.0.0\n",
    };
    for (const char *text : cases) {
        auto read = parse_reservation(text);
        EXPECT_FALSE(read) << '"' << text << '"';
        if (!read) {
            EXPECT_STREQ(read.error, "is not one this endpoint gives");
        }
    }
    // a NUL inside is a byte like any other
    EXPECT_FALSE(parse_reservation(std::string_view("1.1\0.0.0", 8)));
}

TEST(Reservation, SettleChargesTheDifferenceOrAll)
{
    const Reservation r{5, 100, {0, 0}};

    EXPECT_EQ(settle_delta_units(&r, 5), 0);
    EXPECT_EQ(settle_delta_units(&r, 2), -3);
    EXPECT_EQ(settle_delta_units(&r, 0), -5);
    EXPECT_EQ(settle_delta_units(&r, 12), 7);
    EXPECT_EQ(settle_delta_units(nullptr, 0), 0);
    EXPECT_EQ(settle_delta_units(nullptr, 9), 9);
    EXPECT_EQ(settle_delta_units(nullptr, kMaxCost), kMaxCost);
}

} // namespace
} // namespace throttle
