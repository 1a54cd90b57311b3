// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/denial.hpp"

#include <algorithm>

namespace throttle {

namespace {

// costs are at most kMaxCost (< 2^30) and remainders at most a limit
// (< 2^31): both fit their half of the word
constexpr int64_t kMaxRemaining = (int64_t{1} << 31) - 1;

} // namespace

Decision
remember_denial(const KeyState *memory, const ThrottleResult &answer,
                int64_t cost, int64_t sent_at_us, bool gradual) noexcept
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
    d.state.words[1] = pack_counts(
        cost, std::clamp(answer.remaining, int64_t{0}, kMaxRemaining));
    d.expire_at_us =
        sent_at_us + std::max(answer.reset_after_us, answer.retry_after_us);
    return d;
}

Decision
recall_denial(const KeyState *cached, int64_t expire_at_us, int64_t limit,
              int64_t now_us, int64_t cost) noexcept
{
    Decision d;
    d.result.limit = limit;
    d.result.remaining = limit;
    if (cached == nullptr) {
        return d;
    }
    const int64_t until = cached->words[0];
    const int64_t denied_cost = high_count(cached->words[1]);
    const int64_t remaining = low_count(cached->words[1]);
    if (now_us < until && cost == denied_cost) {
        d.result.limited = true;
        d.result.remaining = remaining;
        d.result.retry_after_us = until - now_us;
        d.result.reset_after_us = std::max(expire_at_us, until) - now_us;
    }
    return d;
}

} // namespace throttle
