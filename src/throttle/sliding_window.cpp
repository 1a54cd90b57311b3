// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/windows.hpp"

#include "throttle/lua.hpp"
#include "throttle/policy.hpp"
#include "throttle/window_sync.hpp"

#include <algorithm>
#include <cmath>

namespace throttle {

namespace {

// The Lua twin computes in doubles: every expression below keeps its
// operands, their order and their grouping, so that both round alike.
struct Weights {
    double w;     // the window
    double limit; // L
    double cost;

    double weighted(double e, double prev, double cur) const noexcept
    {
        return ((prev * (w - e)) / w) + cur;
    }
    bool fits(double e, double prev, double cur) const noexcept
    {
        return weighted(e, prev, cur) + cost <= limit;
    }
};

// The first microsecond of the current window from `elapsed` on (or, if
// none, of the next one) at which the request fits, as an offset from
// `start`. The closed form lands within a rounding of the answer; the loops
// step over that rounding.
int64_t
first_fit(const Weights &k, int64_t window_us, int64_t elapsed, int64_t prev,
          int64_t cur, int64_t limit, int64_t cost) noexcept
{
    const double p = static_cast<double>(prev);
    const double c = static_cast<double>(cur);

    if (prev > 0 && cur + cost <= limit) {
        // Clamped while still a double: for a small prev the closed form is
        // far below any int64_t.
        double       e = std::ceil(k.w - (((k.limit - c - k.cost) * k.w) / p));
        const double from = static_cast<double>(elapsed);
        if (e < from) {
            e = from;
        }
        auto i = static_cast<int64_t>(e);
        while (i < window_us && !k.fits(static_cast<double>(i), p, c)) {
            i++;
        }
        if (i < window_us) {
            return i;
        }
    }

    // In the next window the current counter becomes the previous one; at
    // its end the weight is 0, so the loop ends there at the latest (cost
    // <= limit).
    double e = 0;
    if (cur > 0) {
        e = std::ceil(k.w - (((k.limit - k.cost) * k.w) / c));
    }
    if (e < 0) {
        e = 0;
    }
    auto i = static_cast<int64_t>(e);
    while (!k.fits(static_cast<double>(i), c, 0)) {
        i++;
    }
    return window_us + i;
}

} // namespace

Decision
sliding_window_decide(const WindowParams &params, const KeyState *current,
                      int64_t now_us, int64_t cost) noexcept
{
    const int64_t w = params.window_us;
    const int64_t limit = params.limit;
    const int64_t start = window_start(now_us, w);
    const int64_t elapsed = now_us - start;

    const WindowCounts counts(current, start, w);
    const int64_t      prev = counts.previous;
    int64_t            cur = counts.current;

    Decision d;
    d.result.limit = limit;

    // cost is converted only once it is known to be <= limit: it may be
    // anything up to INT64_MAX before.
    const Weights k{static_cast<double>(w), static_cast<double>(limit),
                    cost > limit ? 0.0 : static_cast<double>(cost)};
    const double  wnow =
        k.weighted(static_cast<double>(elapsed), static_cast<double>(prev),
                   static_cast<double>(cur));
    double left;
    if (cost > limit) {
        d.result.limited = true;
        left = k.limit - wnow;
    } else if (wnow + k.cost <= k.limit) {
        left = k.limit - (wnow + k.cost);
        // <= limit < 2^31: the pair still fits one word
        cur += cost;
        d.store = true;
        d.state.words[0] = start;
        d.state.words[1] = pack_counts(prev, cur);
        d.expire_at_us = start + 2 * w;
    } else {
        d.result.limited = true;
        left = k.limit - wnow;
        d.result.retry_after_us =
            start + first_fit(k, w, elapsed, prev, cur, limit, cost) - now_us;
    }

    // Clamped as a double: counters stored under a larger limit (before a
    // reload), or a settle's debt, can make it negative.
    d.result.remaining =
        left > 0 ? static_cast<int64_t>(std::floor(left)) : int64_t{0};
    if (cur > 0) {
        d.result.reset_after_us = start + 2 * w - now_us;
    } else if (prev > 0) {
        d.result.reset_after_us = start + w - now_us;
    }
    return d;
}

namespace {

const WindowSync kSlidingWindowSync(lua::sliding_window_sync,
                                    PreviousWindow::weighs);

class SlidingWindow final : public WindowAlgorithm {
  public:
    // Its counters share a word; the decision names the window it charged,
    // for the refund.
    constexpr SlidingWindow() noexcept
        : WindowAlgorithm("sliding_window", false, kMaxSlidingWindowLimit,
                          {&lua::sliding_window, &lua::sliding_window_refund, 1,
                           &lua::sliding_window_charge},
                          &kSlidingWindowSync, PreviousWindow::weighs)
    {
    }

    Decision decide(const Policy &policy, const KeyState *current,
                    const int64_t *, int64_t              now_us,
                    int64_t cost) const noexcept override
    {
        return sliding_window_decide(window_params(policy), current, now_us,
                                     cost);
    }

    ScriptArgs refund_args(const Policy &policy, int64_t cost,
                           const int64_t tokens[2]) const noexcept override
    {
        return {{cost, tokens[0], policy.window_us, 0}, 3};
    }

    // the previous window weighs less as the current one goes on
    bool units_leave_gradually() const noexcept override { return true; }
};

const SlidingWindow kSlidingWindow;

} // namespace

const Algorithm &
sliding_window_algorithm() noexcept
{
    return kSlidingWindow;
}

} // namespace throttle
