// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/policy.hpp"

#include "throttle/clock.hpp"
#include "throttle/concurrent.hpp"
#include "throttle/lua.hpp"
#include "throttle/plans.hpp"

#include <algorithm>

namespace throttle {

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
    p.rate = params.rate_varies ? kTemplateRate : params.rate;
    p.burst = params.burst_varies ? 0 : burst;
    p.mode = params.mode;
    p.sync_interval_us = params.sync_interval_us;
    p.log_max = params.log_max.value_or(kDefaultLogMax);
    p.emission_interval_us = p.rate.period_us / p.rate.count;
    p.rate_varies = params.rate_varies;
    p.burst_varies = params.burst_varies;

    if (!algorithm.configure(p, why)) {
        return {std::nullopt, template_refusal(p, why)};
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

// Freeing the places of requests still running would let more of them
// run at once than the zone allows; a place whose nginx is gone frees
// itself within a lease. So there is nothing for a reset to do.
const char *
reset_refusal(const Policy &policy, Message &why) noexcept
{
    return concurrent_refusal(
        policy, why,
        "whose places are held by requests still running and free "
        "themselves when these end (within a lease if their nginx is "
        "gone): a reset cannot end them");
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

    // a local or strict zone's table took all of its pages: it left none
    // for the records (names, pending units) of the keys an async zone's
    // sync sends, which an async zone sets aside (table_pages())
    if (now.mode == Mode::async && was.mode != Mode::async) {
        return why.format("changed to sync=async").text();
    }

    // where rate= is a variable, an async zone's records of keys due a
    // sync keep each key's rate, which the workers of the other
    // configuration (old ones finish their last sync) would misread
    if (now.mode == Mode::async && was.mode == Mode::async
        && now.rate_varies != was.rate_varies)
    {
        return why.format("changed rate= to or from a variable in sync=async")
            .text();
    }

    // a concurrent= zone's places are counted in buckets of a quarter lease
    if (was.lease_us != now.lease_us) {
        return why
            .format("changed its lease from %lldms to %lldms",
                    static_cast<long long>(was.lease_us / 1000),
                    static_cast<long long>(now.lease_us / 1000))
            .text();
    }

    // the words beside each key were allocated for the old limit (or
    // log_max=, where the limit varies per request)
    if (was.log_slots != now.log_slots) {
        return why
            .format("changed the timestamps its %.*s keeps per key (its "
                    "limit, or log_max= where the limit is a variable) "
                    "from %lld to %lld",
                    static_cast<int>(after.size()), after.data(),
                    static_cast<long long>(was.log_slots),
                    static_cast<long long>(now.log_slots))
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

namespace {

// A slot's words before its log: GCRA's, and every other algorithm's; the
// last of them is the fence, or an async key's record.
constexpr int64_t kTatSlotWords = 2;  // TAT, fence
constexpr int64_t kFullSlotWords = 4; // expiry, state[2], fence

// An async zone's share of its pages for the records of its keys due a
// sync: 1 / kRecordShare.
constexpr size_t kRecordShare = 4;

} // namespace

int64_t
Policy::slot_words() const noexcept
{
    return (algorithm->expiry_is_state() ? kTatSlotWords : kFullSlotWords)
        + log_slots;
}

void
Policy::load_slot(const int64_t *slot, StoredKey &key) const noexcept
{
    const PendingUnits pending = key.pending;

    key = StoredKey{};
    if (algorithm->expiry_is_state()) {
        key.state.words[0] = slot[0];
        key.expire_at_us = slot[0];
    } else {
        key.expire_at_us = slot[0];
        key.state.words[0] = slot[1];
        key.state.words[1] = slot[2];
    }

    if (mode == Mode::async) {
        key.pending = pending;
        return;
    }
    key.pending.since = slot[slot_words() - log_slots - 1];
}

void
Policy::store_slot(const StoredKey &key, int64_t *slot) const noexcept
{
    int64_t *fence;

    if (algorithm->expiry_is_state()) {
        // an expiry apart from the TAT is only forget_answers()'s "now",
        // with a zeroed TAT: stale either way
        slot[0] = key.state.words[0];
        fence = &slot[1];
    } else {
        slot[0] = key.expire_at_us;
        slot[1] = key.state.words[0];
        slot[2] = key.state.words[1];
        fence = &slot[3];
    }

    if (mode != Mode::async) {
        *fence = key.pending.since;
    }
}

int64_t
Policy::slot_free_at(const int64_t *slot) const noexcept
{
    const int64_t fence =
        mode == Mode::async ? 0 : slot[slot_words() - log_slots - 1];

    return std::max(slot[0], fence);
}

int64_t *
Policy::slot_record(int64_t *slot) const noexcept
{
    return mode == Mode::async ? slot + (slot_words() - log_slots - 1)
                               : nullptr;
}

size_t
Policy::table_pages(size_t free_pages) const noexcept
{
    const size_t pages = free_pages > 0 ? free_pages - 1 : 0;

    return mode == Mode::async ? pages - pages / kRecordShare : pages;
}

int64_t *
Policy::slot_log(int64_t *slot) const noexcept
{
    return slot + (slot_words() - log_slots);
}

SyncLayout
Policy::sync_layout() const noexcept
{
    return algorithm->syncing()->layout(*this);
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
