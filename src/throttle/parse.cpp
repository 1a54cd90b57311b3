#include "throttle/parse.hpp"

#include <charconv>

namespace throttle {

namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

// The largest count a rate may name: finer than one unit per microsecond
// cannot be represented by the emission interval.
constexpr int64_t kMaxRateCount = 1'000'000'000;

std::optional<int64_t>
unit_period_us(std::string_view unit) noexcept
{
    if (unit == "s") {
        return kMicrosPerSecond;
    }
    if (unit == "m") {
        return 60 * kMicrosPerSecond;
    }
    if (unit == "h") {
        return 3600 * kMicrosPerSecond;
    }
    if (unit == "d") {
        return 86400 * kMicrosPerSecond;
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

} // namespace throttle
