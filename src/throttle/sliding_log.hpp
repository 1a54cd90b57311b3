// SPDX-License-Identifier: BSD-2-Clause
// sliding_log: exact; one timestamp per admitted unit, kept while it is in
// the window (an entry at `ts` counts while now < ts + window). A zone
// keeps them in a ring of `limit` slots per key (`log_max` where the limit
// varies per request) beside the key's state
// (words[0] = index of the oldest entry, words[1] = entries); Redis keeps a
// sorted set (src/scripts/sliding_log.lua). Deciding only reads; a request
// that passes every zone is then recorded, so that one rejected by another
// zone of the same location leaves no trace.
//
// A log is exact or it is nothing: nodes could not merge timestamps they
// did not see without keeping every one of them twice, so a sliding_log
// zone cannot sync=async.
#pragma once

#include "throttle/decision.hpp"
#include "throttle/windows.hpp"

#include <cstdint>

namespace throttle {

// Passes iff entries in the window + cost <= limit.
//   remaining    limit - entries in the window (after it, if it passed),
//                0 at least (a key may hold more entries than a smaller
//                limit allows, from before its plan changed)
//   reset_after  until the newest entry leaves the window (after this
//                request, if it passed: the window), 0 if none
//   retry_after  until the (entries + cost - limit)-th oldest entry leaves
//                the window (-1 if passed, or if cost > limit)
//   expire_at    when the newest entry leaves the window (after this
//                request, if it passed: what sliding_log_record() returns)
// `store` is false: the state changes only through sliding_log_record()
// (and sliding_log_refund()).
// `slots` holds params.ring_slots timestamps (at least the limit), in ring
// order (null for a fresh key).
Decision sliding_log_decide(const WindowParams &params, const KeyState &state,
                            const int64_t *slots, int64_t now_us,
                            int64_t cost) noexcept;

// Records `cost` entries at now_us (a request that passed; a settle's
// charge: at most `limit` of them), dropping the
// entries that have left the window first. Entries stay in time order: a
// clock that went back records them at the newest entry's time. Returns
// when the newest entry leaves the window (the key's new expire_at).
int64_t sliding_log_record(const WindowParams &params, KeyState &state,
                           int64_t *slots, int64_t now_us,
                           int64_t cost) noexcept;

// A refund (Algorithm::settle()): removes up to `units` entries stamped
// stamp_us that are still in the window at now_us (those that left it
// are gone already), dropping the entries that have left the window, and
// sets expire_at_us to when the newest entry kept leaves the window, or
// to now_us if none is left. Nothing changes if no entry is removed. As
// sliding_log_refund.lua, which removes a request's entries by their
// stamp and sequence numbers.
void sliding_log_refund(const WindowParams &params, KeyState &state,
                        int64_t *slots, int64_t stamp_us, int64_t now_us,
                        int64_t units, int64_t &expire_at_us) noexcept;

} // namespace throttle
