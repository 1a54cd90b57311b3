// SPDX-License-Identifier: BSD-2-Clause
// Async mode for the window counters (fixed_window, sliding_window): what a
// node keeps of the units it admitted until they reach Redis, and how
// Redis's answer becomes the node's view.
//
// A node keeps its unsent units per window: "cur" for the window starting
// at `since` and, for sliding_window, "prev" for the one before (which
// still weighs on the current one). Units of older windows weigh on no
// decision any more and are let go.
#pragma once

#include "throttle/algorithm.hpp"
#include "throttle/decision.hpp"

#include <cstdint>

namespace throttle {

// Whether the window before the current one still weighs on decisions
// (sliding_window) or not (fixed_window).
enum class PreviousWindow { ignored, weighs };

// A node's unsent units of a key (PendingUnits): units =
// pack_counts(prev, cur), since = the start of cur's window.

// Adds `b` to `a`, both moved to the later of their windows (units from a
// window that no longer weighs are dropped). Windows of `window_us`.
PendingUnits merge_window_units(PreviousWindow previous, int64_t window_us,
                                PendingUnits a, PendingUnits b) noexcept;

// Redis's answer for one key: the counts of its current window (ignored
// previous: counts[0]; weighing: counts[0] = previous, counts[1] =
// current), which had been running for `redis_elapsed_us` when Redis
// answered a sync sent at `sent_at_us` (the node's clock). `unsent` is
// what the node admitted since. Sets the node's state (and its expiry) for
// its window at `now_us` and returns true; false when the answer is about
// another window than the node's current one (a window turned meanwhile):
// the node keeps its view until the next sync.
bool synced_window_state(PreviousWindow previous, int64_t window_us,
                         int64_t sent_at_us, int64_t redis_elapsed_us,
                         const int64_t *counts, const PendingUnits &unsent,
                         int64_t now_us, KeyState &state,
                         int64_t &expire_at_us) noexcept;

// The window counters' Syncing, through their *_sync.lua: a node sends per
// key its units of its window and of the one before, and how long ago its
// window began; Redis adds them to the window then current by its clock
// and answers with how far it is into its window, and per key its counts.
// (Where each key has its own window, a variable rate=, the key sends it
// too, and Redis answers with its clock instead.)
class WindowSync final : public Syncing {
  public:
    constexpr WindowSync(const Script &script, PreviousWindow previous) noexcept
        : script_(&script), previous_(previous)
    {
    }

    SyncLayout layout(const Policy &policy) const noexcept override;
    void head_args(const Policy &policy, int64_t *out) const noexcept override;
    void key_args(const Policy &policy, const PendingUnits &units,
                  int64_t sent_at_us, int64_t *out) const noexcept override;
    bool apply(const Policy &policy, const int64_t *reply_head,
               const int64_t *values, int64_t sent_at_us, int64_t now_us,
               StoredKey &key) const noexcept override;
    PendingUnits charge(const Policy &policy, PendingUnits pending,
                        int64_t cost, int64_t now_us,
                        const KeyState &after) const noexcept override;
    PendingUnits settle(const Policy &policy, PendingUnits pending,
                        const KeyState &before, const KeyState &after,
                        int64_t now_us) const noexcept override;
    PendingUnits merge(const Policy &policy, PendingUnits kept,
                       PendingUnits since_taken) const noexcept override;
    int64_t      total(const PendingUnits &pending) const noexcept override;

  private:
    const Script  *script_;
    PreviousWindow previous_;
};

} // namespace throttle
