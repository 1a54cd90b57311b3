// SPDX-License-Identifier: BSD-2-Clause
// Values of the response fields a throttled location sends:
// draft-ietf-httpapi-ratelimit-headers (RateLimit-Policy, RateLimit, as
// Structured Field lists) and the legacy X-RateLimit-* trio.
//
// Formatting writes into caller-owned buffers (nginx pool memory) and never
// allocates, so nothing here can throw across the glue.
#pragma once

#include "throttle/policy.hpp"
#include "throttle/result.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace throttle {

// Zone names travel in header values as Structured Field strings; allowing
// only this alphabet keeps them free of escaping: letters, digits, _ - .
bool valid_zone_name(std::string_view name) noexcept;

// Room for the longest value a format_* function below can write.
constexpr size_t
max_header_value_len(size_t zone_name_len) noexcept
{
    // quotes, two parameters of ";x=" and 20 digits each
    return zone_name_len + 2 + 2 * (3 + 20);
}

// `"reply";q=16;w=32`: quota units and the window they refill in (seconds,
// rounded up). A concurrent= zone's has no "w": its places come back when
// requests end, not with time (docs/concurrent.md).
size_t format_ratelimit_policy(char *out, std::string_view zone_name,
                               const Policy &policy) noexcept;

// `"reply";r=15;t=2`: remaining units and seconds until reset (rounded up);
// a concurrent= zone's has no "t", for the same reason.
size_t format_ratelimit(char *out, std::string_view zone_name,
                        const Policy         &policy,
                        const ThrottleResult &result) noexcept;

// A non-negative integer in decimal; out needs room for 20 characters.
size_t format_int(char *out, int64_t value) noexcept;

} // namespace throttle
