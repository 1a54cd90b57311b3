// Async mode for the window counters (fixed_window, sliding_window): what a
// node keeps of the units it admitted until they reach Redis, and how
// Redis's answer becomes the node's view.
//
// A node keeps its unsent units per window: "cur" for the window starting
// at `since` and, for sliding_window, "prev" for the one before (which
// still weighs on the current one). Units of older windows weigh on no
// decision any more and are let go. Both counts are below 2^31 (they
// never exceed a limit), and share one word: prev << 32 | cur.
#pragma once

#include "throttle/decision.hpp"
#include "throttle/policy.hpp"

#include <cstdint>

namespace throttle {

struct WindowUnits {
    int64_t packed = 0; // prev << 32 | cur
    int64_t since = 0;  // start of cur's window
};

int64_t window_units_cur(int64_t packed) noexcept;
int64_t window_units_prev(int64_t packed) noexcept;
int64_t window_units_total(int64_t packed) noexcept;

// Adds `b` to `a`, both moved to the later of their windows (units from a
// window that no longer weighs are dropped). Windows of `window_us`; prev
// is kept only for sliding_window.
WindowUnits merge_window_units(Algorithm algorithm, int64_t window_us,
                               WindowUnits a, WindowUnits b) noexcept;

// A node's unsent units of one key, whatever the algorithm: GCRA's count
// and when the first of them was admitted, or the window counters' packed
// counts (above) and their window's start.
struct PendingUnits {
    int64_t units = 0;
    int64_t since = 0;
};

// Adds a request of `cost` admitted at `now_us`; `state` is the key's state
// after it (a window counter's words[0] is the window it counted in).
PendingUnits charge_pending(const Policy &policy, PendingUnits pending,
                            int64_t cost, int64_t now_us,
                            const KeyState &state) noexcept;

// Puts units a failed sync took back together with what was charged
// since: GCRA's counts add up and keep the earlier start; the window
// counters' move to the later window (merge_window_units).
PendingUnits merge_pending(const Policy &policy, PendingUnits kept,
                           PendingUnits since_taken) noexcept;

// How many units `units` stands for (for the count of units lost).
int64_t pending_total(const Policy &policy, int64_t units) noexcept;

// Redis's answer for one key: the counts of its current window (fixed:
// counts[0]; sliding: counts[0] = previous, counts[1] = current), which
// had been running for `redis_elapsed_us` when Redis answered a sync sent
// at `sent_at_us` (the node's clock). `unsent` is what the node admitted
// since. Sets the node's state (and its expiry) for its window at `now_us`
// and returns true; false when the answer is about another window than the
// node's current one (a window turned meanwhile): the node keeps its view
// until the next sync.
bool synced_window_state(Algorithm algorithm, int64_t window_us,
                         int64_t sent_at_us, int64_t redis_elapsed_us,
                         const int64_t *counts, WindowUnits unsent,
                         int64_t now_us, KeyState &state,
                         int64_t &expire_at_us) noexcept;

} // namespace throttle
