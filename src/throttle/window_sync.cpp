#include "throttle/window_sync.hpp"

#include "throttle/windows.hpp"

namespace throttle {

namespace {

constexpr int64_t kLow = (int64_t{1} << 32) - 1;

int64_t
pack(int64_t prev, int64_t cur) noexcept
{
    return (prev << 32) | cur;
}

} // namespace

int64_t
window_units_cur(int64_t packed) noexcept
{
    return packed & kLow;
}

int64_t
window_units_prev(int64_t packed) noexcept
{
    return packed >> 32;
}

int64_t
window_units_total(int64_t packed) noexcept
{
    return window_units_cur(packed) + window_units_prev(packed);
}

WindowUnits
merge_window_units(Algorithm algorithm, int64_t window_us, WindowUnits a,
                   WindowUnits b) noexcept
{
    if (a.packed == 0) {
        return b;
    }
    if (b.packed == 0) {
        return a;
    }
    if (a.since > b.since) {
        WindowUnits t = a;
        a = b;
        b = t;
    }

    const bool sliding = algorithm == Algorithm::sliding_window;
    int64_t    prev = window_units_prev(b.packed);
    int64_t    cur = window_units_cur(b.packed);

    if (a.since == b.since) {
        cur += window_units_cur(a.packed);
        prev += window_units_prev(a.packed);
    } else if (a.since == b.since - window_us) {
        // a's window is b's previous: it weighs on b's only if sliding
        prev += window_units_cur(a.packed);
    }

    return {pack(sliding ? prev : 0, cur), b.since};
}

PendingUnits
charge_pending(const Policy &policy, PendingUnits pending, int64_t cost,
               int64_t now_us, const KeyState &state) noexcept
{
    if (policy.algorithm == Algorithm::gcra) {
        if (pending.units == 0) {
            pending.since = now_us;
        }
        pending.units += cost;
        return pending;
    }
    WindowUnits merged = merge_window_units(
        policy.algorithm, policy.window.window_us,
        {pending.units, pending.since}, {cost, state.words[0]});
    return {merged.packed, merged.since};
}

PendingUnits
merge_pending(const Policy &policy, PendingUnits kept,
              PendingUnits since_taken) noexcept
{
    if (policy.algorithm == Algorithm::gcra) {
        PendingUnits p = since_taken;
        if (kept.units
            && (since_taken.units == 0 || kept.since < since_taken.since)) {
            p.since = kept.since;
        }
        p.units += kept.units;
        return p;
    }
    WindowUnits merged = merge_window_units(
        policy.algorithm, policy.window.window_us, {kept.units, kept.since},
        {since_taken.units, since_taken.since});
    return {merged.packed, merged.since};
}

int64_t
pending_total(const Policy &policy, int64_t units) noexcept
{
    return policy.algorithm == Algorithm::gcra ? units
                                               : window_units_total(units);
}

bool
synced_window_state(Algorithm algorithm, int64_t window_us, int64_t sent_at_us,
                    int64_t redis_elapsed_us, const int64_t *counts,
                    WindowUnits unsent, int64_t now_us, KeyState &state,
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

    int64_t prev = 0, cur = 0;
    if (algorithm == Algorithm::sliding_window) {
        prev = counts[0];
        cur = counts[1];
    } else {
        cur = counts[0];
    }

    if (unsent.packed != 0) {
        if (unsent.since == start) {
            cur += window_units_cur(unsent.packed);
            prev += window_units_prev(unsent.packed);
        } else if (unsent.since == start - window_us) {
            prev += window_units_cur(unsent.packed);
        }
    }

    if (algorithm == Algorithm::sliding_window) {
        state.words[0] = start;
        state.words[1] = pack(prev, cur);
        expire_at_us = start + 2 * window_us;
    } else {
        state.words[0] = start;
        state.words[1] = cur;
        expire_at_us = start + window_us;
    }
    return true;
}

} // namespace throttle
