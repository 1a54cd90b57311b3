// SPDX-License-Identifier: BSD-2-Clause
// Parsing of directive values that carry meaning beyond nginx's stock
// parsers: rates ("30r/m"), non-negative integers (burst=, cost=); and the
// messages that refuse them.
//
// Interface headers under src/throttle/ stay within C++17: the nginx glue is
// compiled by nginx's own build with the compiler's default dialect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace throttle {

// A rate is `count` units per `period_us` microseconds.
struct Rate {
    int64_t count;
    int64_t period_us;
};

// The outcome of a parse: a value, or the reason it was refused (a static
// string, suitable for an nginx EMERG message).
template <typename T> struct Parsed {
    std::optional<T> value;
    const char      *error = nullptr;

    explicit operator bool() const noexcept { return value.has_value(); }
};

// Parses "<count>r/<unit>" with unit s, m, h or d, e.g. "30r/m".
Parsed<Rate> parse_rate(std::string_view text) noexcept;

// Parses a decimal integer in [0, max]; no sign, no spaces, no suffix.
Parsed<int64_t> parse_count(std::string_view text, int64_t max) noexcept;

// The unit of a rate's period: 0 (r/s), 1 (r/m), 2 (r/h) or 3 (r/d); -1
// for a period that is none of them (parse_rate() makes no such rate).
int rate_unit(int64_t period_us) noexcept;

// The period of unit 0 to 3, as rate_unit() numbers them.
int64_t unit_period_us(int unit) noexcept;

// "30r/m": a rate as parse_rate() reads it, for messages.
struct RateText {
    explicit RateText(Rate rate) noexcept;
    char text[16];
};

// Why a configuration is refused, written for nginx's [emerg] line: the
// text is formatted into the caller's object, so that nothing allocates.
class Message {
  public:
    const char *text() const noexcept { return text_; }
    Message    &format(const char *fmt, ...) noexcept
        __attribute__((format(printf, 2, 3)));

  private:
    char text_[320] = {};
};

} // namespace throttle
