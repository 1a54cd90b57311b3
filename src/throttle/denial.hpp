// SPDX-License-Identifier: BSD-2-Clause
// A strict zone's memory of Redis's answers: what Algorithm::remember()
// and recall() do unless an algorithm knows better (GCRA remembers a lower
// bound of the TAT instead, which says more). Redis rejected `cost` units
// at `sent_at` (the zone's clock, when the command left: never later than
// when Redis decided) and said the same request would pass `retry_after`
// later, and the key would be fresh `reset_after` later. Until the retry
// time Redis would reject that cost again with the same answer, as long
// as it admits nothing for the key: a rejection changes nothing, and a
// window's count does not drop before the time the retry was computed
// for. So the zone rejects it by itself, without a round trip. Other costs
// go to Redis: a smaller one may fit, and a larger one's retry time is
// later than the one remembered.
//
// Every answer of Redis's for the key updates the memory: an admission
// makes it wrong (the window counts more now), so it is forgotten; a
// rejection replaces it. Where units leave a window gradually (a sliding
// window or log), a rejected key's remaining units can grow before the
// retry time: only a rejection of cost 1, whose remaining stays 0 until
// then, is remembered, so that every answer is Redis's.
//
// The memory holds for the plan it was made under (docs/plans.md): a
// request of another limit or window (a zone whose rate= or burst= is a
// variable) is rejected from it only where Redis would reject it too. It
// keeps the units the key had used of its limit (limit - remaining) and
// the plan's window; a request of the same window is rejected if those
// units and its cost exceed its own limit (Redis's count is at least
// that, until the retry time), and any other window asks Redis: its
// windows start and end elsewhere.
//
// The memory, as a key's state: words[0] = until when, words[1] = the
// rejected cost (bits 0-29), the units used (bits 30-60), the window's
// unit (bits 61-62, rate_unit()) and bit 63 set (a word of another layout
// is no memory).
#pragma once

#include "throttle/decision.hpp"
#include "throttle/result.hpp"

#include <cstdint>

namespace throttle {

// The plan of the request that Redis answered, or that the memory is
// asked about: its limit, and its window (the rate's period).
struct DenialPlan {
    int64_t limit;
    int64_t window_us;
};

// What to make of Redis's answer to `cost` units sent at sent_at_us under
// `plan`, as a decision to commit: a store of the new memory; a store of
// one that is already stale (expire_at_us 0), to forget the memory
// (`memory`: what is remembered now, null if nothing); or no store, to
// keep it as it is. `gradual`: whether units leave the key's window one by
// one (see above).
Decision remember_denial(const KeyState *memory, const ThrottleResult &answer,
                         int64_t cost, int64_t sent_at_us, bool gradual,
                         const DenialPlan &plan) noexcept;

// Rejects from the memory (`cached`, kept until `expire_at_us`: null if
// none) what Redis would reject of `cost` units under `plan`; a decision
// that is not limited means "ask Redis". Never stores.
Decision recall_denial(const KeyState *cached, int64_t expire_at_us,
                       const DenialPlan &plan, int64_t now_us,
                       int64_t cost) noexcept;

} // namespace throttle
