// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/reservation.hpp"

#include "throttle/policy.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace throttle {

namespace {

// The version this format writes: a text of another is refused, never
// read as if it were this one.
constexpr std::string_view kVersion = "1.";

constexpr size_t kFields = 4;

// One decimal field: an optional '-' and 1 to 19 digits, nothing else.
bool
read_field(std::string_view text, int64_t &value) noexcept
{
    const char *first = text.data();
    const char *last = first + text.size();
    const bool  negative = !text.empty() && text[0] == '-';

    if (text.size() == static_cast<size_t>(negative)
        || text.size() > 19 + static_cast<size_t>(negative))
    {
        return false;
    }
    for (char c : text.substr(negative ? 1 : 0)) {
        if (c < '0' || c > '9') {
            return false;
        }
    }
    auto [end, ec] = std::from_chars(first, last, value);
    return ec == std::errc() && end == last;
}

} // namespace

size_t
format_reservation(const Reservation &r, char *out) noexcept
{
    const int n = std::snprintf(
        out, kReservationTextMax + 1, "1.%lld.%lld.%lld.%lld",
        static_cast<long long>(r.cost_units), static_cast<long long>(r.at_us),
        static_cast<long long>(r.tokens[0]),
        static_cast<long long>(r.tokens[1]));
    return n < 0 ? 0 : std::min(static_cast<size_t>(n), kReservationTextMax);
}

Parsed<Reservation>
parse_reservation(std::string_view text) noexcept
{
    static constexpr const char *kNotOne = "is not one this endpoint gives";
    if (text.substr(0, kVersion.size()) != kVersion) {
        return {std::nullopt, kNotOne};
    }
    text.remove_prefix(kVersion.size());

    int64_t values[kFields] = {};
    for (size_t i = 0; i < kFields; i++) {
        const size_t dot = text.find('.');
        const bool   last = i + 1 == kFields;
        if ((dot == std::string_view::npos) != last
            || !read_field(text.substr(0, dot), values[i]))
        {
            return {std::nullopt, kNotOne};
        }
        text.remove_prefix(last ? text.size() : dot + 1);
    }

    Reservation r{values[0], values[1], {values[2], values[3]}};
    if (r.cost_units < 1 || r.cost_units > kMaxCost || r.at_us < 0) {
        return {std::nullopt, kNotOne};
    }
    return {r, nullptr};
}

int64_t
settle_delta_units(const Reservation *reserved, int64_t settled_units) noexcept
{
    return settled_units - (reserved ? reserved->cost_units : 0);
}

} // namespace throttle
