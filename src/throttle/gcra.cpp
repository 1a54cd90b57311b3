#include "throttle/gcra.hpp"

#include <algorithm>

namespace throttle {

GcraOutcome
gcra_decide(const GcraParams &params, std::optional<int64_t> tat_us,
            int64_t now_us, int64_t cost) noexcept
{
    const int64_t t = params.emission_interval_us;
    const int64_t dvt = params.tolerance_us;

    // A stored TAT in the past means the funnel has drained: same as fresh.
    const int64_t tat = std::max(tat_us.value_or(now_us), now_us);

    GcraOutcome out;
    out.result.limit = params.limit;

    int64_t    increment = 0;
    const bool fits =
        !__builtin_mul_overflow(t, cost, &increment) && increment <= dvt;

    int64_t ttl;
    if (!fits) {
        // More than the whole tolerance: rejected now and forever, so there
        // is no time worth retrying after.
        out.result.limited = true;
        ttl = tat - now_us;
    } else {
        const int64_t new_tat = tat + increment;
        const int64_t allow_at = new_tat - dvt;
        if (now_us < allow_at) {
            out.result.limited = true;
            out.result.retry_after_us = allow_at - now_us;
            ttl = tat - now_us;
        } else {
            out.new_tat_us = new_tat;
            ttl = new_tat - now_us;
        }
    }

    const int64_t next = dvt - ttl;
    out.result.remaining = next > 0 ? next / t : 0;
    out.result.reset_after_us = ttl;
    return out;
}

} // namespace throttle
