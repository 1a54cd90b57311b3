// SPDX-License-Identifier: BSD-2-Clause
// One flight per strict key (docs/modes.md, "A flooded key"): when a
// request waits for its key's script in flight, and the zone's array of
// flights that the glue keeps apart from the keys' slots.
#include "throttle/policy.hpp"
#include "throttle/table.hpp"

#include <algorithm>

namespace throttle {

int64_t
Policy::flight_wait_us(int64_t flight_us, const Decision &decided,
                       int64_t now) const noexcept
{
    if (mode != Mode::strict || flight_us <= now || decided.result.limited
        || decided.result.remaining > 0)
    {
        return 0;
    }
    return flight_us - now;
}

int64_t
Policy::take_flight(int64_t flight_us, int64_t until_us) const noexcept
{
    return mode == Mode::strict ? std::max(flight_us, until_us) : 0;
}

int64_t
Policy::land_flight(int64_t flight_us, int64_t until_us,
                    bool failed) const noexcept
{
    if (flight_us != until_us) {
        return flight_us;
    }
    return failed ? -until_us : 0;
}

size_t
flight_entries(size_t zone_bytes) noexcept
{
    size_t n = 1024;
    while (n > 16 && n * sizeof(FlightEntry) * 256 > zone_bytes) {
        n /= 2;
    }
    return n;
}

} // namespace throttle
