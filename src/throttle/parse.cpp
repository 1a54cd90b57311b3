// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/parse.hpp"

#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <iterator>

namespace throttle {

namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

struct Unit {
    char    name;
    int64_t period_us;
};

constexpr Unit kUnits[] = {
    {'s', kMicrosPerSecond},
    {'m', 60 * kMicrosPerSecond},
    {'h', 3600 * kMicrosPerSecond},
    {'d', 86400 * kMicrosPerSecond},
};

// The largest count a rate may name: finer than one unit per microsecond
// cannot be represented by the emission interval.
constexpr int64_t kMaxRateCount = 1'000'000'000;

std::optional<int64_t>
unit_period_us(std::string_view unit) noexcept
{
    for (const Unit &u : kUnits) {
        if (unit.size() == 1 && unit[0] == u.name) {
            return u.period_us;
        }
    }
    return std::nullopt;
}

} // namespace

Parsed<int64_t>
parse_count(std::string_view text, int64_t max) noexcept
{
    if (text.empty()) {
        return {std::nullopt, "is empty"};
    }
    for (char c : text) {
        if (c < '0' || c > '9') {
            return {std::nullopt, "is not a non-negative integer"};
        }
    }
    int64_t value = 0;
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value > max) {
        return {std::nullopt, "is too large"};
    }
    return {value, nullptr};
}

Parsed<Rate>
parse_rate(std::string_view text) noexcept
{
    auto r = text.find("r/");
    if (r == std::string_view::npos || r == 0) {
        return {std::nullopt,
                "must look like 30r/m (units: r/s, r/m, r/h, "
                "r/d)"};
    }
    auto period = unit_period_us(text.substr(r + 2));
    if (!period) {
        return {std::nullopt,
                "has an unknown unit (use r/s, r/m, r/h or "
                "r/d)"};
    }
    auto count = parse_count(text.substr(0, r), kMaxRateCount);
    if (!count) {
        return {std::nullopt, "has an invalid count"};
    }
    if (*count.value == 0) {
        return {std::nullopt, "must be greater than zero"};
    }
    if (*period / *count.value == 0) {
        return {std::nullopt, "is faster than one request per microsecond"};
    }
    return {Rate{*count.value, *period}, nullptr};
}

int
rate_unit(int64_t period_us) noexcept
{
    for (size_t i = 0; i < std::size(kUnits); i++) {
        if (kUnits[i].period_us == period_us) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

int64_t
unit_period_us(int unit) noexcept
{
    return kUnits[unit & 3].period_us;
}

RateText::RateText(Rate rate) noexcept : text{}
{
    char unit = '?';
    for (const Unit &u : kUnits) {
        if (u.period_us == rate.period_us) {
            unit = u.name;
        }
    }
    std::snprintf(text, sizeof(text), "%lldr/%c",
                  static_cast<long long>(rate.count), unit);
}

Message &
Message::format(const char *fmt, ...) noexcept
{
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text_, sizeof(text_), fmt, args);
    va_end(args);
    return *this;
}

} // namespace throttle
