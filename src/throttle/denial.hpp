// A strict zone's memory of Redis's rejections: what Algorithm::remember()
// and recall() do unless an algorithm knows better (GCRA remembers a lower
// bound of the TAT instead, which says more). Redis rejected `cost` units
// at `sent_at` (the zone's clock, when the command left: never later than
// when Redis decided) and said the same request would pass `retry_after`
// later, and the key would be fresh `reset_after` later. Until the retry
// time Redis would reject that cost again: a window's count only grows
// until the time the retry was computed for. So the zone rejects it by
// itself, without a round trip, with the same answer. Other costs go to
// Redis: a smaller one may fit, and a larger one's retry time is later
// than the one remembered.
//
// The memory, as a key's state: words[0] = until when, words[1] =
// pack_counts(cost, remaining).
#pragma once

#include "throttle/decision.hpp"
#include "throttle/result.hpp"

#include <cstdint>

namespace throttle {

// What to store for a rejection, kept until the key is fresh (for the
// reset it reports); nothing (store false) for one that never passes
// (retry_after -1: no time to wait for).
Decision remember_denial(const ThrottleResult &rejection, int64_t cost,
                         int64_t sent_at_us) noexcept;

// Rejects from the memory (`cached`, kept until `expire_at_us`: null if
// none) what Redis would; a decision that is not limited means "ask
// Redis". Never stores.
Decision recall_denial(const KeyState *cached, int64_t expire_at_us,
                       int64_t limit, int64_t now_us, int64_t cost) noexcept;

} // namespace throttle
