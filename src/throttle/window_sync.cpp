// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/window_sync.hpp"

#include "throttle/policy.hpp"
#include "throttle/windows.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace throttle {

PendingUnits
merge_window_units(PreviousWindow previous, int64_t window_us, PendingUnits a,
                   PendingUnits b) noexcept
{
    if (a.units == 0) {
        return b;
    }
    if (b.units == 0) {
        return a;
    }
    if (a.since > b.since) {
        std::swap(a, b);
    }

    int64_t prev = high_count(b.units);
    int64_t cur = low_count(b.units);

    if (a.since == b.since) {
        cur += low_count(a.units);
        prev += high_count(a.units);
    } else if (a.since == b.since - window_us) {
        // a's window is b's previous: it weighs on b's only if sliding
        prev += low_count(a.units);
    }

    return {pack_counts(previous == PreviousWindow::weighs ? prev : 0, cur),
            b.since};
}

bool
synced_window_state(PreviousWindow previous, int64_t window_us,
                    int64_t sent_at_us, int64_t redis_elapsed_us,
                    const int64_t *counts, const PendingUnits &unsent,
                    int64_t now_us, KeyState &state,
                    int64_t &expire_at_us) noexcept
{
    // Redis's window, in this node's clock: the window start nearest to
    // when it began by Redis's account (the clocks agree to far less than
    // half a window, or windows would not line up at all)
    const int64_t began = sent_at_us - redis_elapsed_us + window_us / 2;
    const int64_t redis_start = window_start(began < 0 ? 0 : began, window_us);
    const int64_t start = window_start(now_us, window_us);

    if (redis_start != start) {
        return false;
    }

    const bool weighs = previous == PreviousWindow::weighs;
    int64_t    prev = weighs ? counts[0] : 0;
    int64_t    cur = weighs ? counts[1] : counts[0];

    // (a settle's refund among them may take some back: not below 0, as
    // Redis will not go either)
    if (unsent.units != 0) {
        if (unsent.since == start) {
            cur += low_count(unsent.units);
            prev += high_count(unsent.units);
        } else if (unsent.since == start - window_us) {
            prev += low_count(unsent.units);
        }
    }
    // a count no script of ours gives (another writer) is held to what a
    // window counts, so that it packs
    cur = std::clamp<int64_t>(cur, 0, kMaxWindowCount);
    prev = std::clamp<int64_t>(prev, 0, kMaxWindowCount);

    state.words[0] = start;
    if (weighs) {
        state.words[1] = pack_counts(prev, cur);
        expire_at_us = start + 2 * window_us;
    } else {
        state.words[1] = cur;
        expire_at_us = start + window_us;
    }
    return true;
}

SyncLayout
WindowSync::layout(const Policy &policy) const noexcept
{
    return {script_, 1, policy.rate_varies ? 4u : 3u, 1,
            previous_ == PreviousWindow::weighs ? 2u : 1u};
}

// The window, or 0 where each key sends its own (then Redis answers with
// its clock, from which each key's place in its window follows).
void
WindowSync::head_args(const Policy &policy, int64_t *out) const noexcept
{
    out[0] = policy.rate_varies ? 0 : policy.window_us;
}

void
WindowSync::key_args(const Policy &policy, const PendingUnits &units,
                     int64_t sent_at_us, int64_t *out) const noexcept
{
    out[0] = low_count(units.units);
    out[1] = high_count(units.units);
    out[2] = units.units ? std::max<int64_t>(sent_at_us - units.since, 0) : 0;
    if (policy.rate_varies) {
        out[3] = policy.window_us;
    }
}

bool
WindowSync::apply(const Policy &policy, const int64_t *reply_head,
                  const int64_t *values, int64_t sent_at_us, int64_t now_us,
                  StoredKey &key) const noexcept
{
    const int64_t redis_elapsed_us =
        policy.rate_varies ? reply_head[0] % policy.window_us : reply_head[0];

    return synced_window_state(previous_, policy.window_us, sent_at_us,
                               redis_elapsed_us, values, key.pending, now_us,
                               key.state, key.expire_at_us);
}

// `after.words[0]` is the window the request counted in.
PendingUnits
WindowSync::charge(const Policy &policy, PendingUnits pending, int64_t cost,
                   int64_t, const KeyState &after) const noexcept
{
    return merge_window_units(previous_, policy.window_us, pending,
                              {cost, after.words[0]});
}

// What the settle changed of the counters, both read as of now's window.
PendingUnits
WindowSync::settle(const Policy &policy, PendingUnits pending,
                   const KeyState &before, const KeyState &after,
                   int64_t now_us) const noexcept
{
    const int64_t      w = policy.window_us;
    const int64_t      start = window_start(now_us, w);
    const WindowCounts was(&before, start, w);
    const WindowCounts is(&after, start, w);
    const int64_t      prev =
        previous_ == PreviousWindow::weighs ? is.previous - was.previous : 0;
    const int64_t cur = is.current - was.current;

    if (prev == 0 && cur == 0) {
        return pending;
    }
    return merge_window_units(previous_, w, pending,
                              {pack_counts(prev, cur), start});
}

PendingUnits
WindowSync::merge(const Policy &policy, PendingUnits kept,
                  PendingUnits since_taken) const noexcept
{
    return merge_window_units(previous_, policy.window_us, kept, since_taken);
}

int64_t
WindowSync::total(const PendingUnits &pending) const noexcept
{
    return std::abs(low_count(pending.units))
        + std::abs(high_count(pending.units));
}

} // namespace throttle
