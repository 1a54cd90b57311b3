#include "throttle/policy.hpp"

namespace throttle {

namespace {

struct AlgorithmName {
    Algorithm        algorithm;
    std::string_view name;
};

constexpr AlgorithmName kAlgorithms[] = {
    {Algorithm::gcra, "gcra"},
    {Algorithm::fixed_window, "fixed_window"},
    {Algorithm::sliding_window, "sliding_window"},
    {Algorithm::sliding_log, "sliding_log"},
};

} // namespace

Parsed<Algorithm>
parse_algorithm(std::string_view name) noexcept
{
    for (const AlgorithmName &a : kAlgorithms) {
        if (a.name == name) {
            return {a.algorithm, nullptr};
        }
    }
    return {std::nullopt,
            "is unknown (use \"gcra\", \"fixed_window\", \"sliding_window\" "
            "or \"sliding_log\")"};
}

std::string_view
algorithm_name(Algorithm algorithm) noexcept
{
    for (const AlgorithmName &a : kAlgorithms) {
        if (a.algorithm == algorithm) {
            return a.name;
        }
    }
    return "?";
}

Parsed<Policy>
make_policy(Algorithm algorithm, Rate rate, int64_t burst,
            int64_t log_max) noexcept
{
    if (burst < 0 || burst > kMaxBurst) {
        return {std::nullopt, "burst is out of range"};
    }
    Policy p;
    p.algorithm = algorithm;
    p.rate = rate;
    p.burst = burst;

    if (algorithm != Algorithm::gcra) {
        // rate counts and bursts are both below 2^31: no overflow
        p.window.window_us = rate.period_us;
        p.window.limit = rate.count + burst;
        if (algorithm == Algorithm::sliding_window
            && p.window.limit > kMaxSlidingWindowLimit)
        {
            return {std::nullopt,
                    "the limit (the rate's count + burst) is above "
                    "2147483647, the most a sliding_window counts"};
        }
        if (algorithm == Algorithm::sliding_log && p.window.limit > log_max) {
            return {std::nullopt,
                    "the limit (the rate's count + burst) is above log_max"};
        }
        return {p, nullptr};
    }

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
       int64_t cost, const int64_t *log) noexcept
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
    case Algorithm::fixed_window:
        d = fixed_window_decide(policy.window, current, now_us, cost);
        break;
    case Algorithm::sliding_window:
        d = sliding_window_decide(policy.window, current, now_us, cost);
        break;
    case Algorithm::sliding_log:
        if (current == nullptr || log == nullptr) {
            const KeyState fresh{};
            d = sliding_log_decide(policy.window, fresh, nullptr, now_us, cost);
        } else {
            d = sliding_log_decide(policy.window, *current, log, now_us, cost);
        }
        break;
    }
    return d;
}

} // namespace throttle
