// SPDX-License-Identifier: BSD-2-Clause
// What a throttle decision tells the caller, in the shape of redis-cell's
// CL.THROTTLE reply. Durations are microseconds.
#pragma once

#include <cstdint>

namespace throttle {

struct ThrottleResult {
    bool    limited = false;
    int64_t limit = 0;
    int64_t remaining = 0;
    // Time until the key is back to its fresh state.
    int64_t reset_after_us = 0;
    // Time until the same request would pass; -1 if it passed, and -1 if
    // its cost can never fit in the zone.
    int64_t retry_after_us = -1;
};

// Seconds for a header or a variable: rounded up, never negative, so a
// client that waits that long is never early.
constexpr int64_t
ceil_seconds(int64_t us) noexcept
{
    // (no "+ 999'999": that would overflow near INT64_MAX)
    return us <= 0 ? 0 : us / 1'000'000 + (us % 1'000'000 != 0);
}

// Milliseconds, likewise: for nginx's timers and the decision endpoint.
constexpr int64_t
ceil_millis(int64_t us) noexcept
{
    return us <= 0 ? 0 : us / 1'000 + (us % 1'000 != 0);
}

} // namespace throttle
