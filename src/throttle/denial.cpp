// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/denial.hpp"

#include "throttle/parse.hpp"

#include <algorithm>

namespace throttle {

namespace {

// What words[1] keeps: a cost (at most kMaxCost < 2^30), the units used of
// a limit (a limit is below 2^31: a window's count and burst are at most
// 1e9 each) and a window's unit, in 63 bits; the top bit marks the word as
// this one. A memory written before (pack_counts(cost, remaining), which
// a zone kept over a reload that loaded this module) has it clear, and is
// no memory: Redis decides.
constexpr int      kUsedShift = 30;
constexpr int      kUnitShift = 61;
constexpr int64_t  kCostMask = (int64_t{1} << kUsedShift) - 1;
constexpr int64_t  kUsedMask = (int64_t{1} << (kUnitShift - kUsedShift)) - 1;
constexpr uint64_t kMarked = uint64_t{1} << 63;

// A window's unit in the memory: every rate's period is one of the four
// (rate_unit()); another period, which only tests make (for a zone of one
// window), reads as r/d's.
int64_t
window_unit(int64_t window_us) noexcept
{
    const int unit = rate_unit(window_us);
    return unit < 0 ? 3 : unit;
}

struct Remembered {
    int64_t cost;
    int64_t used;
    int64_t unit;
};

int64_t
pack_memory(const Remembered &m) noexcept
{
    return static_cast<int64_t>(kMarked
                                | static_cast<uint64_t>((m.unit << kUnitShift)
                                                        | (m.used << kUsedShift)
                                                        | m.cost));
}

// (a cost of -1, which no request has, for a word not marked)
Remembered
unpack_memory(int64_t word) noexcept
{
    if ((static_cast<uint64_t>(word) & kMarked) == 0) {
        return {-1, 0, 0};
    }
    return {word & kCostMask, (word >> kUsedShift) & kUsedMask,
            (word >> kUnitShift) & 3};
}

} // namespace

Decision
remember_denial(const KeyState *memory, const ThrottleResult &answer,
                int64_t cost, int64_t sent_at_us, bool gradual,
                const DenialPlan &plan) noexcept
{
    Decision d;
    if (!answer.limited) {
        // admitted: the window counts more than the memory says
        d.store = memory != nullptr;
        return d;
    }
    if (answer.retry_after_us <= 0 || (gradual && cost != 1)) {
        // a cost that never fits (no time to wait for), or an answer that
        // may change before its retry time: nothing to remember, and the
        // memory, if any, still holds (a rejection changes nothing)
        return d;
    }
    d.store = true;
    d.state.words[0] = sent_at_us + answer.retry_after_us;
    d.state.words[1] = pack_memory(
        {std::clamp<int64_t>(cost, 0, kCostMask),
         std::clamp<int64_t>(plan.limit - answer.remaining, 0, kUsedMask),
         window_unit(plan.window_us)});
    d.expire_at_us =
        sent_at_us + std::max(answer.reset_after_us, answer.retry_after_us);
    return d;
}

Decision
recall_denial(const KeyState *cached, int64_t expire_at_us,
              const DenialPlan &plan, int64_t now_us, int64_t cost) noexcept
{
    Decision d;
    d.result.limit = plan.limit;
    // what a fresh key's window would have left after this request: none
    // tells Policy::flight_wait_us() to wait for the key's flight (a
    // burst=0 key's memory has always passed by the time a request fits)
    d.result.remaining = std::max(int64_t{0}, plan.limit - cost);
    if (cached == nullptr) {
        return d;
    }
    const int64_t    until = cached->words[0];
    const Remembered m = unpack_memory(cached->words[1]);
    if (now_us < until && cost == m.cost
        && m.unit == window_unit(plan.window_us) && m.used + cost > plan.limit)
    {
        d.result.limited = true;
        d.result.remaining = std::max<int64_t>(plan.limit - m.used, 0);
        d.result.retry_after_us = until - now_us;
        d.result.reset_after_us = std::max(expire_at_us, until) - now_us;
    }
    return d;
}

} // namespace throttle
