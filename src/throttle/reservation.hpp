// SPDX-License-Identifier: BSD-2-Clause
// A throttle_api reservation: what a decision charged a key, as text the
// caller hands back with a settle call, so that the settle gives back
// exactly that charge, or charges what was used beyond it. It carries what
// a throttle line's settle= keeps in the request instead: the cost, when
// the zone charged it (its clock: a local or async settle gives back what
// of the charge still counts then), and the tokens of a strict zone's
// decision script (its refund script needs them). Callers see it as
// opaque; the text starts with its version, so that a later format can
// tell an earlier one.
#pragma once

#include "throttle/parse.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace throttle {

struct Reservation {
    int64_t cost_units = 0; // 1 to kMaxCost
    int64_t at_us = 0;      // the zone's clock when it charged, >= 0
    int64_t tokens[2] = {}; // strict zones: the decision script's
};

// "1.<cost>.<at>.<token>.<token>": the longest text, without a NUL.
constexpr size_t kReservationTextMax = 2 + 10 + 1 + 19 + 2 * (1 + 20);

// Writes the reservation's text into `out` (kReservationTextMax bytes at
// least); returns its length.
size_t format_reservation(const Reservation &reservation, char *out) noexcept;

// Reads a text format_reservation() wrote; refuses any other (a version,
// a field or a count out of range), with a reason for the caller.
Parsed<Reservation> parse_reservation(std::string_view text) noexcept;

// The units a settle of `settled_units` charges (negative: gives back):
// the difference from what was reserved, or all of them when nothing was.
int64_t settle_delta_units(const Reservation *reserved,
                           int64_t            settled_units) noexcept;

} // namespace throttle
