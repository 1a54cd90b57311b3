// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/policy.hpp"

#include "throttle/clock.hpp"
#include "throttle/concurrent.hpp"
#include "throttle/lua.hpp"

#include <algorithm>

namespace throttle {

namespace {

// A concurrent= zone: it takes none of a rate zone's parameters, each
// refused with why.
Parsed<Policy>
make_concurrent_policy(const ZoneParams &params, Message &why) noexcept
{
    const char *rate_param = params.rate.count ? "rate="
        : params.burst                         ? "burst="
        : params.algorithm                     ? "algorithm="
        : params.log_max                       ? "log_max="
                                               : nullptr;
    if (rate_param) {
        return {std::nullopt,
                why.format("\"%s\" is for a zone of a rate; \"concurrent=\" "
                           "limits requests in flight: give each its own "
                           "zone, and both to the location's \"throttle\"",
                           rate_param)
                    .text()};
    }

    const Algorithm &algorithm = concurrent_algorithm();
    if (params.mode == Mode::async) {
        return {std::nullopt,
                why.format("\"concurrent=\" cannot \"sync=async\": %s",
                           algorithm.why_not_async())
                    .text()};
    }

    Policy p;
    p.algorithm = &algorithm;
    p.mode = params.mode;
    p.limit = *params.concurrent;
    p.lease_us = params.lease_us.value_or(kDefaultLeaseUs);
    if (p.limit < 1 || p.limit > kMaxPlaces || p.lease_us < kMinLeaseUs) {
        return {std::nullopt,
                why.format("concurrent=%lld lease=%lldms is out of range",
                           static_cast<long long>(p.limit),
                           static_cast<long long>(p.lease_us / 1000))
                    .text()};
    }
    (void) algorithm.configure(p, why);
    return {p, nullptr};
}

} // namespace

Parsed<Policy>
make_policy(const ZoneParams &params, Message &why) noexcept
{
    if (params.concurrent) {
        return make_concurrent_policy(params, why);
    }
    if (params.lease_us) {
        return {std::nullopt,
                why.format("\"lease=\" needs \"concurrent=\"").text()};
    }

    const Algorithm &algorithm =
        params.algorithm ? *params.algorithm : default_algorithm();
    const int64_t burst = params.burst.value_or(0);

    if (burst < 0 || burst > kMaxBurst) {
        return {std::nullopt, why.format("burst is out of range").text()};
    }

    if (params.log_max && !algorithm.takes_log_max) {
        Message names;
        return {std::nullopt,
                why.format("\"log_max=\" needs %s", log_max_algorithms(names))
                    .text()};
    }

    if (params.mode == Mode::async && algorithm.syncing() == nullptr) {
        return {std::nullopt,
                why.format("\"algorithm=%.*s\" cannot \"sync=async\"; %s",
                           static_cast<int>(algorithm.name.size()),
                           algorithm.name.data(), algorithm.why_not_async())
                    .text()};
    }

    Policy p;
    p.algorithm = &algorithm;
    p.rate = params.rate;
    p.burst = burst;
    p.mode = params.mode;
    p.sync_interval_us = params.sync_interval_us;
    p.log_max = params.log_max.value_or(kDefaultLogMax);
    p.emission_interval_us = params.rate.period_us / params.rate.count;

    if (!algorithm.configure(p, why)) {
        return {std::nullopt, why.text()};
    }
    return {p, nullptr};
}

const char *
delay_refusal(const Policy &policy, Message &why) noexcept
{
    const Algorithm &algorithm = *policy.algorithm;
    if (algorithm.can_delay) {
        return nullptr;
    }
    if (policy.holds_places()) {
        return why
            .format("is a \"concurrent=\" zone: %s", algorithm.why_no_delay())
            .text();
    }

    Message names;
    return why
        .format("has \"algorithm=%.*s\", which cannot space requests out: %s; "
                "\"delay=\" needs %s",
                static_cast<int>(algorithm.name.size()), algorithm.name.data(),
                algorithm.why_no_delay(), delay_algorithms(names))
        .text();
}

namespace {

// A line's parameter a concurrent= zone cannot take: why, or null for a
// zone of a rate.
const char *
concurrent_refusal(const Policy &policy, Message &why,
                   const char *because) noexcept
{
    return policy.holds_places()
        ? why.format("is a \"concurrent=\" zone, %s", because).text()
        : nullptr;
}

} // namespace

const char *
cost_refusal(const Policy &policy, Message &why) noexcept
{
    return concurrent_refusal(policy, why, "where a request holds one place");
}

const char *
settle_refusal(const Policy &policy, Message &why) noexcept
{
    return concurrent_refusal(
        policy, why, "whose requests give their place back when they end");
}

const char *
reload_refusal(const Policy &was, const Policy &now, Message &why) noexcept
{
    // by name: a reload may load the module anew, at another address
    const std::string_view before = was.algorithm->name;
    const std::string_view after = now.algorithm->name;

    if (before != after) {
        return why
            .format("changed its algorithm from %.*s to %.*s",
                    static_cast<int>(before.size()), before.data(),
                    static_cast<int>(after.size()), after.data())
            .text();
    }

    // a strict zone's keys hold what it remembers of Redis's rejections,
    // the others' the state: not to be read as the other
    if ((was.mode == Mode::strict) != (now.mode == Mode::strict)
        && !now.algorithm->memory_is_state())
    {
        return why.format("changed to or from sync=strict").text();
    }

    // a concurrent= zone's places are counted in buckets of a quarter lease
    if (was.lease_us != now.lease_us) {
        return why
            .format("changed its lease from %lldms to %lldms",
                    static_cast<long long>(was.lease_us / 1000),
                    static_cast<long long>(now.lease_us / 1000))
            .text();
    }

    // the words beside each key were allocated for the old limit
    if (was.log_slots != now.log_slots) {
        return why
            .format("changed the limit of its %.*s from %lld to %lld",
                    static_cast<int>(after.size()), after.data(),
                    static_cast<long long>(was.limit),
                    static_cast<long long>(now.limit))
            .text();
    }

    return nullptr;
}

int64_t
Policy::now_us() const noexcept
{
    return algorithm->wall_clock ? realtime_now_us() : monotonic_now_us();
}

Decision
Policy::decide(const StoredKey *key, const int64_t *log, int64_t now,
               int64_t cost) const noexcept
{
    const bool      live = key != nullptr && key->expire_at_us > now;
    const KeyState *held = live ? &key->state : nullptr;

    if (mode == Mode::strict) {
        return algorithm->recall(*this, held, live ? key->expire_at_us : 0, now,
                                 cost);
    }
    return algorithm->decide(*this, held, live ? log : nullptr, now, cost);
}

void
Policy::commit(const Decision &decision, int64_t now, int64_t cost,
               StoredKey &key, int64_t *log) const noexcept
{
    if (!decision.store) {
        return;
    }

    if (mode == Mode::strict) {
        // a remembered rejection
        key.state = decision.state;
        key.expire_at_us = decision.expire_at_us;
        return;
    }

    algorithm->record(*this, decision, now, cost, key.state, key.expire_at_us,
                      log);

    if (mode == Mode::async) {
        key.pending = algorithm->syncing()->charge(*this, key.pending, cost,
                                                   now, key.state);
    }
}

void
Policy::settle(StoredKey &key, int64_t *log, int64_t reserved_units,
               int64_t settled_units, int64_t reserved_at_us,
               int64_t now) const noexcept
{
    // both counts >= 0: their difference cannot overflow
    const int64_t delta_units = std::max<int64_t>(settled_units, 0)
        - std::max<int64_t>(reserved_units, 0);
    if (mode == Mode::strict || delta_units == 0) {
        return;
    }

    if (key.expire_at_us <= now) {
        if (delta_units < 0) {
            return; // nothing of the reservation is left to give back
        }
        key.state = KeyState{};
    }

    const KeyState before = key.state;
    algorithm->settle(*this, delta_units, reserved_at_us, now, key.state,
                      key.expire_at_us, log);

    if (mode == Mode::async) {
        key.pending = algorithm->syncing()->settle(*this, key.pending, before,
                                                   key.state, now);
    }
}

int64_t
Policy::renew(StoredKey &key, int64_t *log, int64_t held_at_us,
              int64_t now) const noexcept
{
    return renew_held_place(*this, key, log, held_at_us, now);
}

int64_t
Policy::delay_us(const ThrottleResult &result, int64_t cost,
                 int64_t delay) const noexcept
{
    return result.limited ? 0 : algorithm->delay_us(*this, result, cost, delay);
}

ScriptCall
Policy::decision_call(int64_t cost) const noexcept
{
    return {algorithm->strict_scripts().decide,
            algorithm->decision_args(*this, cost)};
}

ScriptReply
Policy::read_decision(const redisReply *reply) const noexcept
{
    return decode_decision_reply(reply, algorithm->strict_scripts().tokens);
}

ScriptCall
Policy::refund_call(int64_t cost, const int64_t tokens[2]) const noexcept
{
    return {algorithm->strict_scripts().refund,
            algorithm->refund_args(*this, cost, tokens)};
}

ScriptCall
Policy::settle_call(int64_t delta_units, const int64_t tokens[2]) const noexcept
{
    if (delta_units < 0) {
        return refund_call(-delta_units, tokens);
    }
    return {algorithm->strict_scripts().charge,
            algorithm->charge_args(*this, delta_units)};
}

ScriptCall
Policy::renew_call(const int64_t tokens[2]) const noexcept
{
    return {&lua::concurrent_renew, {{lease_us, tokens[0], tokens[1], 0}, 3}};
}

Decision
Policy::remember_answer(const StoredKey *key, const ThrottleResult &answer,
                        int64_t cost, int64_t sent_at_us,
                        int64_t now) const noexcept
{
    if (key != nullptr && sent_at_us < key->pending.since) {
        return Decision{}; // it may tell of the key before a refund or settle
    }

    const bool live = key != nullptr && key->expire_at_us > now;
    Decision   d = algorithm->remember(*this, live ? &key->state : nullptr,
                                       answer, cost, sent_at_us);
    // a stale memory is worth writing only over one the zone holds
    d.store = d.store && (d.expire_at_us > now || live);
    return d;
}

void
Policy::forget_answers(StoredKey &key, int64_t now,
                       int64_t answered_by_us) const noexcept
{
    key.state = KeyState{};
    key.expire_at_us = now;
    key.pending.since = std::max(key.pending.since, answered_by_us);
}

int64_t
Policy::flight_wait_us(const StoredKey *key, const Decision &decided,
                       int64_t now) const noexcept
{
    if (mode != Mode::strict || key == nullptr || key->pending.units <= now
        || decided.result.limited || decided.result.remaining > 0)
    {
        return 0;
    }
    return key->pending.units - now;
}

void
Policy::take_flight(StoredKey &key, int64_t until_us) const noexcept
{
    key.pending.units = std::max(key.pending.units, until_us);
}

void
Policy::land_flight(StoredKey &key, int64_t until_us) const noexcept
{
    if (key.pending.units == until_us) {
        key.pending.units = 0;
    }
}

SyncLayout
Policy::sync_layout() const noexcept
{
    return algorithm->syncing()->layout();
}

void
Policy::sync_head_args(int64_t *out) const noexcept
{
    algorithm->syncing()->head_args(*this, out);
}

void
Policy::sync_key_args(const PendingUnits &units, int64_t sent_at_us,
                      int64_t *out) const noexcept
{
    algorithm->syncing()->key_args(*this, units, sent_at_us, out);
}

bool
Policy::apply_sync(const int64_t *reply_head, const int64_t *values,
                   int64_t sent_at_us, int64_t now,
                   StoredKey &key) const noexcept
{
    // fresh everywhere: the node's own view, which holds at least its own
    // units, has nothing to learn (most keys of a crawl)
    const size_t n = sync_layout().reply_per_key;
    bool         fresh = true;
    for (size_t i = 0; i < n; i++) {
        fresh = fresh && values[i] == 0;
    }

    return !fresh
        && algorithm->syncing()->apply(*this, reply_head, values, sent_at_us,
                                       now, key);
}

PendingUnits
Policy::merge_pending(PendingUnits kept,
                      PendingUnits since_taken) const noexcept
{
    return algorithm->syncing()->merge(*this, kept, since_taken);
}

int64_t
Policy::pending_total(const PendingUnits &pending) const noexcept
{
    const Syncing *syncing = algorithm->syncing();
    return syncing != nullptr ? syncing->total(pending) : 0;
}

} // namespace throttle
