// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/windows.hpp"

#include "throttle/lua.hpp"
#include "throttle/policy.hpp"
#include "throttle/window_sync.hpp"

#include <algorithm>

namespace throttle {

Decision
fixed_window_decide(const WindowParams &params, const KeyState *current,
                    int64_t now_us, int64_t cost) noexcept
{
    const int64_t w = params.window_us;
    const int64_t limit = params.limit;
    const int64_t start = window_start(now_us, w);
    const int64_t end = start + w;

    // A counter of any other window (an older one, or a later one if the
    // clock went back) says nothing about this one.
    int64_t count = 0;
    if (current != nullptr && current->words[0] == start) {
        count = current->words[1];
    }

    Decision d;
    d.result.limit = limit;
    if (cost > limit) {
        // Tested before adding: no window will ever hold it, and cost may be
        // anything up to INT64_MAX.
        d.result.limited = true;
    } else if (count + cost <= limit) {
        count += cost;
        d.store = true;
        d.state.words[0] = start;
        d.state.words[1] = count;
        d.expire_at_us = end;
    } else {
        d.result.limited = true;
        d.result.retry_after_us = end - now_us;
    }

    // A counter stored under a larger limit (before a reload), or a
    // settle's debt, may exceed this one.
    d.result.remaining = std::max<int64_t>(0, limit - count);
    d.result.reset_after_us = count > 0 ? end - now_us : 0;
    return d;
}

namespace {

const WindowSync kFixedWindowSync(lua::fixed_window_sync,
                                  PreviousWindow::ignored);

class FixedWindow final : public WindowAlgorithm {
  public:
    // The decision names the window it charged, for the refund.
    constexpr FixedWindow() noexcept
        : WindowAlgorithm("fixed_window", false, INT64_MAX,
                          {&lua::fixed_window, &lua::fixed_window_refund, 1,
                           &lua::fixed_window_charge},
                          &kFixedWindowSync, PreviousWindow::ignored)
    {
    }

    Decision decide(const Policy &policy, const KeyState *current,
                    const int64_t *, int64_t              now_us,
                    int64_t cost) const noexcept override
    {
        return fixed_window_decide(window_params(policy), current, now_us,
                                   cost);
    }

    ScriptArgs refund_args(const Policy &, int64_t cost,
                           const int64_t tokens[2]) const noexcept override
    {
        return {{cost, tokens[0], 0, 0}, 2};
    }
};

const FixedWindow kFixedWindow;

} // namespace

const Algorithm &
fixed_window_algorithm() noexcept
{
    return kFixedWindow;
}

} // namespace throttle
