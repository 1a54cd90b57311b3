// SPDX-License-Identifier: BSD-2-Clause
// The clocks zones decide by.
#pragma once

#include <cstdint>
#include <ctime>

namespace throttle {

// Microseconds of CLOCK_MONOTONIC: shared by all workers of one machine,
// unaffected by wall-clock steps, and alive across reloads like the zone
// state that is measured with it.
inline int64_t
monotonic_now_us() noexcept
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// Microseconds of CLOCK_REALTIME: the window algorithms' clock, so that
// their windows start on whole seconds, minutes, hours and days, as those
// of Redis's TIME do (for nodes whose clocks NTP keeps in step).
inline int64_t
realtime_now_us() noexcept
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

} // namespace throttle
