// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/headers.hpp"

#include <charconv>
#include <cstring>

namespace throttle {

namespace {

// `"name";k1=v1;k2=v2`, without the second parameter if key2 is 0.
size_t
format_item(char *out, std::string_view name, char key1, int64_t value1,
            char key2, int64_t value2) noexcept
{
    char *p = out;
    *p++ = '"';
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    *p++ = '"';
    for (auto [key, value] : {std::pair{key1, value1}, {key2, value2}}) {
        if (key == 0) {
            break;
        }
        *p++ = ';';
        *p++ = key;
        *p++ = '=';
        p += format_int(p, value);
    }
    return static_cast<size_t>(p - out);
}

} // namespace

bool
valid_zone_name(std::string_view name) noexcept
{
    if (name.empty()) {
        return false;
    }
    for (char c : name) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
            || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
        if (!ok) {
            return false;
        }
    }
    return true;
}

size_t
format_int(char *out, int64_t value) noexcept
{
    if (value < 0) {
        value = 0;
    }
    auto [end, ec] = std::to_chars(out, out + 20, value);
    (void) ec; // 20 characters hold any int64_t
    return static_cast<size_t>(end - out);
}

size_t
format_ratelimit_policy(char *out, std::string_view zone_name,
                        const Policy &policy) noexcept
{
    return format_item(out, zone_name, 'q', policy.limit,
                       policy.holds_places() ? 0 : 'w',
                       ceil_seconds(policy.window_us));
}

size_t
format_ratelimit(char *out, std::string_view zone_name, const Policy &policy,
                 const ThrottleResult &result) noexcept
{
    return format_item(out, zone_name, 'r', result.remaining,
                       policy.holds_places() ? 0 : 't',
                       ceil_seconds(result.reset_after_us));
}

} // namespace throttle
