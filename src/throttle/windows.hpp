// SPDX-License-Identifier: BSD-2-Clause
// The counting algorithms of the source documents, over windows as long as
// the rate's unit (r/s: 1 s, r/m: 60 s, r/h, r/d), admitting `limit` units
// per window (the rate's count + burst). Times are microseconds of a wall
// clock, so that windows start on whole seconds, minutes, hours and days
// (UTC), as Redis's TIME has them; `now_us` must be >= 0.
//
// Every function here has a Lua twin in src/scripts/ that gives the same
// answers for the same timeline (t/unit/scripts_test.cpp checks it against a
// real Redis).
#pragma once

#include "throttle/algorithm.hpp"
#include "throttle/decision.hpp"
#include "throttle/window_sync.hpp"

#include <cstdint>

namespace throttle {

struct WindowParams {
    int64_t window_us;  // the rate's unit
    int64_t limit;      // units per window: the rate's count + burst
    int64_t ring_slots; // sliding_log: the entries a key's ring holds (the
                        // zone's log_slots: its limit, or log_max where
                        // the limit varies per request)
};

WindowParams window_params(const Policy &policy) noexcept;

// What the window algorithms share (fixed_window, sliding_window,
// sliding_log): the wall clock, a window of the rate's unit, a limit of
// its count + burst (at most max_limit), decision scripts that take the
// window, the limit and the cost, and whether the window before the
// current one weighs on its decisions. The counters settle alike
// (settle_window_counts()); a log settles its own way.
class WindowAlgorithm : public Algorithm {
  public:
    constexpr WindowAlgorithm(std::string_view algorithm_name, bool log_max,
                              int64_t max_limit, StrictScripts scripts,
                              const Syncing *sync,
                              PreviousWindow previous) noexcept
        : Algorithm(algorithm_name, true, log_max, false),
          max_limit_(max_limit), scripts_(scripts), sync_(sync),
          previous_(previous)
    {
    }

    bool configure(Policy &policy, Message &why) const noexcept override;
    void settle(const Policy &policy, int64_t delta_units,
                int64_t reserved_at_us, int64_t now_us, KeyState &state,
                int64_t &expire_at_us, int64_t *log) const noexcept override;
    StrictScripts strict_scripts() const noexcept override { return scripts_; }
    ScriptArgs    decision_args(const Policy &policy,
                                int64_t       cost) const noexcept override;
    // The window, the units, and the most a counter holds.
    ScriptArgs     charge_args(const Policy &policy,
                               int64_t       units) const noexcept override;
    const Syncing *syncing() const noexcept override { return sync_; }
    const char    *why_no_delay() const noexcept override
    {
        return "it admits a window's count at any time in the window, with "
               "no time at which a request would conform";
    }

  protected:
    ~WindowAlgorithm() = default;

  private:
    int64_t        max_limit_;
    StrictScripts  scripts_;
    const Syncing *sync_;
    PreviousWindow previous_;
};

// The most a window counter holds: two share a word (pack_counts()).
// Every limit is below it (a rate's count and a burst are at most 1e9
// each); a settle's debt saturates there.
constexpr int64_t kMaxWindowCount = (int64_t{1} << 31) - 1;

// The start of the window `now_us` falls in: windows are aligned on
// multiples of their length since the epoch.
constexpr int64_t
window_start(int64_t now_us, int64_t window_us) noexcept
{
    return now_us - now_us % window_us;
}

// fixed_window: a counter per aligned window [start, start + window).
// A key's state: words[0] = start of the window counted, words[1] = units
// charged to it (beyond the limit after a settle's debt).
// Passes iff counted + cost <= limit; a rejection counts nothing.
//   remaining    limit - counted (after this request, if it passed)
//   reset_after  to the window's end if anything is counted in it, else 0
//   retry_after  to the window's end (-1 if passed, or if cost > limit)
//   expire_at    the window's end
Decision fixed_window_decide(const WindowParams &params,
                             const KeyState *current, int64_t now_us,
                             int64_t cost) noexcept;

// The largest limit of a sliding_window zone: its two counters share a word.
constexpr int64_t kMaxSlidingWindowLimit = kMaxWindowCount;

// sliding_window: Cloudflare's approximation of a sliding window from the
// counters of the current aligned window and the previous one:
//   weighted = previous * (window - elapsed) / window + current
// in doubles, evaluated in exactly this order (the Lua twin does the same,
// so both round alike). Passes iff weighted + cost <= limit.
// A key's state: words[0] = start of the current window, words[1] =
// pack_counts(units of the previous window, units of the current one).
//   remaining    max(0, floor(limit - weighted - cost)) if passed,
//                max(0, floor(limit - weighted)) if not
//   reset_after  to the end of the next window if the current one counts
//                anything, else to the end of the current one if the
//                previous one does, else 0
//   retry_after  the first microsecond at which the same request would
//                pass, less now (-1 if passed, or if cost > limit). "Pass"
//                by the exact weighted count: the doubles alone, which
//                round a tiny weight away next to a large limit, may admit
//                it a little earlier (up to a few ms at 1e9 units a day).
//   expire_at    the end of the window after the current one
Decision sliding_window_decide(const WindowParams &params,
                               const KeyState *current, int64_t now_us,
                               int64_t cost) noexcept;

// A window counter's state read as of the window starting at `start`
// (fixed_window's count is pack_counts(0, count)): a stored window that
// has since become the previous one brings its count along; an older one
// (or a later one, if the clock went back) counts nothing.
struct WindowCounts {
    int64_t previous = 0;
    int64_t current = 0;

    // (inline: sliding_window_decide() reads it for every request)
    constexpr WindowCounts(const KeyState *state, int64_t start,
                           int64_t window_us) noexcept
    {
        if (state == nullptr) {
            return;
        }
        const int64_t stored = state->words[0];
        if (stored == start) {
            previous = high_count(state->words[1]);
            current = low_count(state->words[1]);
        } else if (stored == start - window_us) {
            previous = low_count(state->words[1]);
        }
    }
};

// Settles a window counter's key (Algorithm::settle()), its counters first
// moved on to now's window as deciding reads them: a charge adds to the
// current counter, up to kMaxWindowCount; a refund takes from the counter
// of the window reserved_at_us fell in, never below 0, if that is now's
// or, where the previous window weighs, the one before (an older one's
// units weigh nothing by now), as fixed_window_refund.lua and
// sliding_window_refund.lua do (and fixed_window_charge.lua and
// sliding_window_charge.lua charge). The key expires when its counters weigh
// nothing any more: now_us if they already do not.
void settle_window_counts(PreviousWindow previous, const WindowParams &params,
                          int64_t delta_units, int64_t reserved_at_us,
                          int64_t now_us, KeyState &state,
                          int64_t &expire_at_us) noexcept;

} // namespace throttle
