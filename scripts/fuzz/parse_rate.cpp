// SPDX-License-Identifier: BSD-2-Clause
// parse_rate(): what rate= reads. It accepts exactly "<count>r/<unit>"
// (decimal digits, a unit of s, m, h or d) for a count from 1 to 10^9 and
// at most one unit a microsecond, and RateText writes an accepted rate
// back as the same text, leading zeros aside.
#include "support.hpp"

#include <string>

namespace throttle::fuzz {
namespace {

// The text as RateText would write the rate it names, if it is of the
// accepted form: the count's leading zeros dropped.
std::optional<std::string>
canonical(std::string_view text)
{
    const size_t r = text.find("r/");
    if (r == 0 || r == std::string_view::npos || text.size() != r + 3
        || std::string_view("smhd").find(text[r + 2]) == std::string_view::npos)
    {
        return std::nullopt;
    }
    std::string_view digits = text.substr(0, r);
    if (digits.find_first_not_of("0123456789") != std::string_view::npos) {
        return std::nullopt;
    }
    const size_t first =
        std::min(digits.find_first_not_of('0'), digits.size() - 1);
    return std::string(digits.substr(first)) + std::string(text.substr(r));
}

} // namespace

void
fuzz_one(std::string_view input)
{
    const auto parsed = parse_rate(input);
    const auto expected = canonical(input);

    if (!parsed) {
        expect(parsed.error != nullptr && *parsed.error != '\0',
               "a refusal says why");
        return;
    }

    const Rate rate = *parsed.value;
    expect(expected.has_value(), "only <count>r/<unit> is accepted");
    expect(rate.count >= 1 && rate.count <= 1'000'000'000,
           "a count from 1 to 10^9");
    expect(rate.period_us == 1'000'000 || rate.period_us == 60'000'000
               || rate.period_us == 3'600'000'000
               || rate.period_us == 86'400'000'000,
           "a period of a second, a minute, an hour or a day");
    expect(rate.period_us / rate.count >= 1, "at most one a microsecond");

    const RateText back(rate);
    expect(*expected == back.text, "RateText writes what was read");
}

} // namespace throttle::fuzz
