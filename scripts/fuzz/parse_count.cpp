// SPDX-License-Identifier: BSD-2-Clause
// parse_count(): what burst=, cost=, log_max=, database= and keepalive=
// read. Its input here is the bound (8 bytes, little-endian) then the text.
// It accepts exactly the non-empty strings of decimal digits whose value
// is at most the bound, and reads that value.
#include "support.hpp"

#include <cstring>

namespace throttle::fuzz {
namespace {

// The value of a non-empty string of decimal digits, if it fits int64_t.
std::optional<int64_t>
decimal(std::string_view text)
{
    if (text.empty()) {
        return std::nullopt;
    }
    int64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9' || __builtin_mul_overflow(value, 10, &value)
            || __builtin_add_overflow(value, c - '0', &value))
        {
            return std::nullopt;
        }
    }
    return value;
}

} // namespace

void
fuzz_one(std::string_view input)
{
    int64_t max = 0;
    if (input.size() < sizeof(max)) {
        return;
    }
    std::memcpy(&max, input.data(), sizeof(max));
    const std::string_view text = input.substr(sizeof(max));

    const auto parsed = parse_count(text, max);
    const auto value = decimal(text);

    if (value && *value <= max) {
        expect(parsed && *parsed.value == *value,
               "digits up to the bound read as their value");
    } else {
        expect(!parsed && parsed.error != nullptr && *parsed.error != '\0',
               "anything else is refused, saying why");
    }
}

} // namespace throttle::fuzz
