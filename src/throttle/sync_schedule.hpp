// SPDX-License-Identifier: BSD-2-Clause
// Async zones: when a node syncs a zone with Redis, and what it keeps of a
// sync that failed. The glue holds the zone's schedule in shared memory and
// does the I/O; the rules are here. Times are microseconds of the zone's
// clock, except the timers', which are nginx's milliseconds.
#pragma once

#include <algorithm>
#include <cstdint>

namespace throttle {

// The longest between two ticks of a worker: a worker shutting down waits
// for its next tick to send its last units.
constexpr int64_t kSyncTickMaxMs = 250;

// How often a worker looks whether a sync is due: four times an interval,
// so that a round runs at most a quarter interval late whichever worker
// takes it, at least every 2 ms and at most every kSyncTickMaxMs.
constexpr int64_t
sync_tick_ms(int64_t interval_us) noexcept
{
    return std::min(std::max(interval_us / 4000, int64_t{2}), kSyncTickMaxMs);
}

// Whether the round due at next_round_us is due at now_us: within a
// millisecond, since timers fire on whole, cached milliseconds.
constexpr bool
sync_due(int64_t next_round_us, int64_t now_us) noexcept
{
    return now_us + 1000 >= next_round_us;
}

// When the round after one taken at now_us is due: the cadence is kept
// unless it has fallen behind.
constexpr int64_t
next_sync_round(int64_t next_round_us, int64_t interval_us,
                int64_t now_us) noexcept
{
    return next_round_us + interval_us > now_us ? next_round_us + interval_us
                                                : now_us + interval_us;
}

// How long a sync call may take: as long as an interval, but a worker
// shutting down waits no longer than a request would.
constexpr int64_t
sync_call_timeout_ms(int64_t interval_us, int64_t timeout_ms,
                     bool exiting) noexcept
{
    return exiting ? timeout_ms : std::max(timeout_ms, interval_us / 1000);
}

// When a claim on a round taken at now_us lapses (its worker may have
// died): after the interval and the longest its calls may take.
constexpr int64_t
sync_claim_until(int64_t now_us, int64_t interval_us,
                 int64_t timeout_ms) noexcept
{
    return now_us + interval_us + std::max(timeout_ms * 1000, interval_us);
}

// A key is synced twice after it is charged: once to send its units, once
// to learn what the other nodes charged meanwhile.
constexpr int kSyncRounds = 2;

// Whether a key's second sync is skipped: it has nothing to send, and its
// funnel has drained here; should the other nodes have filled it, this
// node learns it at the sync after its next use, within the stated bound.
// Many keys used once each (a crawl) would otherwise cost Redis a second
// read each.
constexpr bool
skips_last_sync(int rounds_left, int64_t pending_units, int64_t expire_at_us,
                int64_t now_us) noexcept
{
    return rounds_left == 1 && pending_units == 0 && expire_at_us <= now_us;
}

// What a sync call that failed leaves of the units it took.
enum class FailedSync {
    // they did not reach Redis: they go out with the next sync
    units_kept,
    // they may have (a stalled Redis may still run the call): they count
    // as delivered, sending them again would charge them twice and lock the
    // keys out; the keys are only read again
    units_delivered,
};

constexpr FailedSync
failed_sync(bool sent, bool replied) noexcept
{
    return sent && !replied ? FailedSync::units_delivered
                            : FailedSync::units_kept;
}

} // namespace throttle
