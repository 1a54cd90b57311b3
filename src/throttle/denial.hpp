// A strict zone's memory of Redis's rejections, for the window algorithms
// (GCRA's zones remember a lower bound of the TAT instead, which says
// more). Redis rejected `cost` units at `sent_at` (the zone's clock, when
// the command left: never later than when Redis decided) and said the same
// request would pass `retry_after` later, and the key would be fresh
// `reset_after` later. Until the retry time Redis would reject that cost
// again: a window's count only grows until the time the retry was computed
// for. So the zone rejects it by itself, without a round trip, with the
// same answer. Other costs go to Redis: a smaller one may fit, and a
// larger one's retry time is later than the one remembered.
#pragma once

#include "throttle/decision.hpp"
#include "throttle/result.hpp"

#include <cstdint>

namespace throttle {

struct RememberedDenial {
    KeyState state; // words[0] = until, words[1] = cost << 32 | remaining
    // when the key is fresh again (the zone keeps the memory until then,
    // for the reset it reports)
    int64_t expire_at_us = 0;
};

// What to store for a rejection; nothing (expire_at_us 0) for one that
// never passes (retry_after -1: no time to wait for).
RememberedDenial remember_denial(const ThrottleResult &rejection, int64_t cost,
                                 int64_t sent_at_us) noexcept;

// Rejects from the memory (`cached`, kept until `expire_at_us`: null if
// none) what Redis would; a decision that is not limited means "ask
// Redis". Never stores.
Decision recall_denial(const KeyState *cached, int64_t expire_at_us,
                       int64_t limit, int64_t now_us, int64_t cost) noexcept;

} // namespace throttle
