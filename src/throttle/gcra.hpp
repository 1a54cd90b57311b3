// SPDX-License-Identifier: BSD-2-Clause
// The generic cell rate algorithm (the "funnel"), with the exact semantics
// of redis-cell's CL.THROTTLE: emission interval T = period / count,
// tolerance DVT = T * (burst + 1); a key's state is its theoretical arrival
// time (TAT). The reference vectors are in t/unit/gcra_test.cpp.
//
// A key's state: words[0] = TAT, us of the zone's clock (in a strict zone:
// a lower bound of Redis's TAT, which only grows).
#pragma once

#include "throttle/result.hpp"

#include <cstdint>
#include <optional>

namespace throttle {

struct Policy;

struct GcraParams {
    int64_t emission_interval_us; // T = period / count
    int64_t tolerance_us;         // DVT = T * (burst + 1)
    int64_t limit;                // burst + 1
};

// The longest time a zone may take to refill (T * (burst + 1)): 2^51 us.
constexpr int64_t kMaxToleranceUs = int64_t{1} << 51;

GcraParams gcra_params(const Policy &policy) noexcept;

struct GcraOutcome {
    ThrottleResult result;
    // The theoretical arrival time to store; meaningful only when the
    // request passed (a rejection stores nothing).
    int64_t new_tat_us = 0;
};

// Decides one request of `cost` units at `now_us` against the stored
// theoretical arrival time `tat_us` (nullopt for a key never seen or
// expired). cost must be >= 0.
GcraOutcome gcra_decide(const GcraParams &params, std::optional<int64_t> tat_us,
                        int64_t now_us, int64_t cost) noexcept;

// delay=: how long a request that GCRA admitted for `cost` units waits so
// that at most `delay` units are ahead of it in the funnel when it goes on.
// Its reset_after is new_tat - now, so the wait is
//   max(0, reset_after - (delay + cost) * T):
// with cost 1, limit_req's delay= (the first delay + 1 of a burst at once,
// the others T apart). 0 where (delay + cost) * T overflows: no TAT is that
// far ahead.
int64_t gcra_delay_us(int64_t emission_interval_us, int64_t reset_after_us,
                      int64_t cost, int64_t delay) noexcept;

// The furthest ahead of now a settle's debt may put a key's TAT: 2^52 us
// (about 142 years), twice the longest tolerance, so that a key in that
// much debt still rejects every request for 71 years at least. (Debts
// that large come only from a slow rate: 1e9 units at 1r/d are 2^66 us.)
constexpr int64_t kMaxDebtUs = int64_t{1} << 52;

// Settles a key whose TAT is `tat_us` (at most now_us for a fresh key) by
// delta_units (see Algorithm::settle()): a charge moves the TAT to
// max(TAT, now) + delta * T, at most kMaxDebtUs ahead of now (and never
// where decide's TAT + tolerance would overflow); a refund moves it back
// by -delta * T, never before now, as gcra_refund.lua does. A funnel
// drains as one: when the reservation was made does not matter. Returns
// the new TAT; the key is fresh if it is now_us.
int64_t gcra_settle(int64_t emission_interval_us, int64_t tat_us,
                    int64_t delta_units, int64_t now_us) noexcept;

// Async mode: a key's TAT in this node's clock after a sync. Redis said the
// TAT was "global_ttl_us" ahead of its clock when it ran the batch sent at
// "sent_at_us"; the node has charged "pending_units" more since.
constexpr int64_t
synced_tat(int64_t sent_at_us, int64_t global_ttl_us,
           int64_t emission_interval_us, int64_t pending_units) noexcept
{
    return sent_at_us + global_ttl_us + emission_interval_us * pending_units;
}

} // namespace throttle
