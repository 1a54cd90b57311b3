// SPDX-License-Identifier: BSD-2-Clause
// Plans (throttle/plans.hpp): the policy a request's rate= and burst=
// texts make, as a worker's cache of them gives it. Whatever the texts,
// and however they come and go through the cache's 16 entries, the cache
// gives what make_plan() makes of the same texts now: the same policy,
// or the same refusal; and a plan made keeps the template's algorithm and
// mode, with the rate and burst the texts say.
//
// The input: a byte that picks the template (the algorithm, the mode, and
// whether rate=, burst= or both are variables), then lines, read in pairs
// as a request's rate and burst texts.
#include "support.hpp"

#include "throttle/plans.hpp"

#include <cstring>

namespace throttle::fuzz {
namespace {

constexpr const char *kAlgorithms[] = {"gcra", "fixed_window", "sliding_window",
                                       "sliding_log"};

std::optional<Policy>
zone_template(uint8_t pick)
{
    Message    why;
    ZoneParams params;
    auto       found = find_algorithm(kAlgorithms[pick % 4], why);
    const int  varies = (pick / 4) % 3; // both, rate only, burst only

    if (!found) {
        return std::nullopt;
    }
    params.algorithm = *found.value;
    params.mode = static_cast<Mode>((pick / 12) % 3);
    params.sync_interval_us = params.mode == Mode::async ? 100'000 : 0;
    params.rate_varies = varies != 2;
    params.burst_varies = varies != 1;
    if (!params.rate_varies) {
        params.rate = Rate{30, 60'000'000};
    }
    if (!params.burst_varies) {
        params.burst = 15;
    }

    auto zone = make_policy(params, why);
    return zone ? zone.value : std::nullopt;
}

bool
same_policy(const Policy &a, const Policy &b)
{
    return a.algorithm == b.algorithm && a.mode == b.mode
        && a.rate.count == b.rate.count && a.rate.period_us == b.rate.period_us
        && a.burst == b.burst && a.limit == b.limit
        && a.window_us == b.window_us
        && a.emission_interval_us == b.emission_interval_us
        && a.log_slots == b.log_slots;
}

std::string_view
next_line(std::string_view &rest)
{
    const size_t     eol = std::min(rest.find('\n'), rest.size());
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(std::min(eol + 1, rest.size()));
    return line;
}

} // namespace

void
fuzz_one(std::string_view input)
{
    if (input.empty()) {
        return;
    }

    const auto zone = zone_template(static_cast<uint8_t>(input[0]));
    if (!zone) {
        return; /* a zone nginx -t refuses: an async sliding_log */
    }

    PlanCache        cache;
    std::string_view rest = input.substr(1);

    while (!rest.empty()) {
        const PlanTexts texts{next_line(rest), next_line(rest)};
        Message         cached_why, made_why;
        auto            cached = cache.find(*zone, texts, cached_why);
        auto            made = make_plan(*zone, texts, made_why);

        expect(cached.value.has_value() == made.value.has_value(),
               "the cache refuses what make_plan() refuses");
        if (!made) {
            expect(std::strcmp(cached.error, made.error) == 0,
                   "and says why in the same words");
            continue;
        }

        const Policy &plan = *made.value;
        expect(same_policy(**cached.value, plan),
               "the cache gives the policy make_plan() makes");
        expect(plan.algorithm == zone->algorithm && plan.mode == zone->mode,
               "a plan keeps the zone's algorithm and mode");
        if (!zone->rate_varies) {
            expect(plan.rate.count == zone->rate.count
                       && plan.rate.period_us == zone->rate.period_us,
                   "a constant rate= stays");
        }
    }
}

} // namespace throttle::fuzz
