#include "throttle/policy.hpp"

namespace throttle {

Parsed<Algorithm>
parse_algorithm(std::string_view name) noexcept
{
    if (name == "gcra") {
        return {Algorithm::gcra, nullptr};
    }
    if (name == "fixed_window" || name == "sliding_window"
        || name == "sliding_log") {
        return {std::nullopt,
                "is not available in this version (only "
                "\"gcra\" is)"};
    }
    return {std::nullopt, "is unknown (use \"gcra\")"};
}

std::string_view
algorithm_name(Algorithm algorithm) noexcept
{
    switch (algorithm) {
    case Algorithm::gcra:
        return "gcra";
    }
    return "?";
}

Parsed<Policy>
make_policy(Algorithm algorithm, Rate rate, int64_t burst) noexcept
{
    if (burst < 0 || burst > kMaxBurst) {
        return {std::nullopt, "burst is out of range"};
    }
    Policy p;
    p.algorithm = algorithm;
    p.rate = rate;
    p.burst = burst;
    p.gcra.emission_interval_us = rate.period_us / rate.count;
    p.gcra.limit = burst + 1;
    // Bound the tolerance (to about 71 years) so that "now + 2 * tolerance"
    // stays below 2^53 microseconds: exact in int64_t here and in the
    // doubles of Redis's Lua, which must give the same answers.
    if (__builtin_mul_overflow(p.gcra.emission_interval_us, p.gcra.limit,
                               &p.gcra.tolerance_us)
        || p.gcra.tolerance_us > kMaxToleranceUs)
    {
        return {std::nullopt, "burst is too large for this rate"};
    }
    return {p, nullptr};
}

Decision
decide(const Policy &policy, const KeyState *current, int64_t now_us,
       int64_t cost) noexcept
{
    Decision d;
    switch (policy.algorithm) {
    case Algorithm::gcra: {
        std::optional<int64_t> tat;
        if (current != nullptr) {
            tat = current->words[0];
        }
        GcraOutcome g = gcra_decide(policy.gcra, tat, now_us, cost);
        d.result = g.result;
        if (!g.result.limited) {
            d.store = true;
            d.state.words[0] = g.new_tat_us;
            d.expire_at_us = g.new_tat_us;
        }
        break;
    }
    }
    return d;
}

} // namespace throttle
