// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/plans.hpp"

#include <cstring>

namespace throttle {

namespace {

// The zone's template with this rate and burst, as make_policy() would
// make a zone of them: what configure() refuses, it refuses.
Parsed<Policy>
plan_policy(const Policy &zone, Rate rate, int64_t burst, Message &why) noexcept
{
    Policy p = zone;
    p.rate = rate;
    p.burst = burst;
    p.emission_interval_us = rate.period_us / rate.count;

    if (!p.algorithm->configure(p, why)) {
        return {std::nullopt, why.text()};
    }
    return {p, nullptr};
}

constexpr int      kUnitBits = 2;
constexpr uint32_t kUnitMask = (1u << kUnitBits) - 1;

bool
same_text(std::string_view text, const char *kept, uint8_t kept_len) noexcept
{
    return text.size() == kept_len
        && (kept_len == 0 || std::memcmp(text.data(), kept, kept_len) == 0);
}

} // namespace

Parsed<Policy>
make_plan(const Policy &zone, const PlanTexts &texts, Message &why) noexcept
{
    Rate    rate = zone.rate;
    int64_t burst = zone.burst;

    if (zone.rate_varies) {
        auto parsed = parse_rate(texts.rate);
        if (!parsed) {
            return {std::nullopt,
                    why.format("rate \"%.*s\" %s",
                               static_cast<int>(texts.rate.size()),
                               texts.rate.data(),
                               texts.rate.empty() ? "is empty" : parsed.error)
                        .text()};
        }
        rate = *parsed.value;
    }

    if (zone.burst_varies) {
        auto parsed = parse_count(texts.burst, kMaxBurst);
        if (!parsed) {
            return {std::nullopt,
                    why.format("burst \"%.*s\" %s",
                               static_cast<int>(texts.burst.size()),
                               texts.burst.data(), parsed.error)
                        .text()};
        }
        burst = *parsed.value;
    }

    return plan_policy(zone, rate, burst, why);
}

const char *
template_refusal(const Policy &p, Message &why) noexcept
{
    if (!p.varies()) {
        return why.text();
    }
    const Message configured = why;
    return why
        .format("%s, whatever the variable gives (this is with the "
                "smallest value it may give, %s)",
                configured.text(), p.rate_varies ? "1r/s" : "burst=0")
        .text();
}

uint32_t
pack_rate(Rate rate) noexcept
{
    const int unit = rate_unit(rate.period_us);
    return static_cast<uint32_t>(rate.count) << kUnitBits
        | static_cast<uint32_t>(unit < 0 ? 0 : unit);
}

Policy
synced_plan(const Policy &zone, uint32_t packed_rate) noexcept
{
    if (!zone.rate_varies) {
        return zone;
    }

    const Rate rate{static_cast<int64_t>(packed_rate >> kUnitBits),
                    unit_period_us(static_cast<int>(packed_rate & kUnitMask))};
    Message    why;
    // a rate some request of the zone had: it fits the template's burst
    // (its own or 0); a count of 0 is a record no request wrote
    auto plan = rate.count > 0 ? plan_policy(zone, rate, zone.burst, why)
                               : Parsed<Policy>{};
    return plan ? *plan.value : zone;
}

Parsed<const Policy *>
PlanCache::find(const Policy &zone, const PlanTexts &texts,
                Message &why) noexcept
{
    const std::string_view rate = zone.rate_varies ? texts.rate : "";
    const std::string_view burst = zone.burst_varies ? texts.burst : "";

    for (Entry &e : entries_) {
        if (e.used && same_text(rate, e.rate, e.rate_len)
            && same_text(burst, e.burst, e.burst_len))
        {
            return {&e.policy, nullptr};
        }
    }

    auto plan = make_plan(zone, {rate, burst}, why);
    if (!plan) {
        return {std::nullopt, plan.error};
    }

    Entry &e = entries_[next_];
    e.policy = *plan.value;
    if (rate.size() > kMaxText || burst.size() > kMaxText) {
        e.used = false; // (kept for this call only)
        return {&e.policy, nullptr};
    }

    next_ = (next_ + 1) % kEntries;
    e.used = true;
    e.rate_len = static_cast<uint8_t>(rate.size());
    e.burst_len = static_cast<uint8_t>(burst.size());
    if (!rate.empty()) {
        std::memcpy(e.rate, rate.data(), rate.size());
    }
    if (!burst.empty()) {
        std::memcpy(e.burst, burst.data(), burst.size());
    }
    return {&e.policy, nullptr};
}

} // namespace throttle
