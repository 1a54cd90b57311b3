// SPDX-License-Identifier: BSD-2-Clause
#include "throttle/gcra.hpp"

#include "throttle/denial.hpp"
#include "throttle/lua.hpp"
#include "throttle/policy.hpp"

#include <algorithm>
#include <cstdlib>

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

int64_t
gcra_delay_us(int64_t emission_interval_us, int64_t reset_after_us,
              int64_t cost, int64_t delay) noexcept
{
    int64_t ahead_units = 0;
    int64_t ahead_us = 0;
    if (__builtin_add_overflow(delay, cost, &ahead_units)
        || __builtin_mul_overflow(ahead_units, emission_interval_us, &ahead_us))
    {
        return 0;
    }
    // (compared first: a malformed reset_after cannot overflow)
    return reset_after_us > ahead_us ? reset_after_us - ahead_us : 0;
}

int64_t
gcra_settle(int64_t emission_interval_us, int64_t tat_us, int64_t delta_units,
            int64_t now_us) noexcept
{
    const int64_t tat = std::max(tat_us, now_us);
    int64_t       span_us = 0;
    int64_t       moved_us = 0;
    // signed: a refund's span is negative
    const bool overflows =
        __builtin_mul_overflow(emission_interval_us, delta_units, &span_us)
        || __builtin_add_overflow(tat, span_us, &moved_us);

    if (delta_units < 0) {
        // one that overflows gives back far more than the key holds
        return overflows ? now_us : std::max(moved_us, now_us);
    }

    // decide() adds up to a tolerance to the TAT
    constexpr int64_t kLatestTatUs = INT64_MAX - kMaxToleranceUs;
    const int64_t     ceiling_us =
        now_us < kLatestTatUs - kMaxDebtUs ? now_us + kMaxDebtUs : kLatestTatUs;
    return overflows ? ceiling_us : std::min(moved_us, ceiling_us);
}

GcraParams
gcra_params(const Policy &policy) noexcept
{
    return {policy.emission_interval_us, policy.window_us, policy.limit};
}

namespace {

// A GCRA decision as a zone stores it: the new TAT, kept until it is past.
Decision
gcra_decision(const Policy &policy, const KeyState *current, int64_t now_us,
              int64_t cost) noexcept
{
    std::optional<int64_t> tat;
    if (current != nullptr) {
        tat = current->words[0];
    }
    const GcraOutcome g = gcra_decide(gcra_params(policy), tat, now_us, cost);

    Decision d;
    d.result = g.result;
    if (!g.result.limited) {
        d.store = true;
        d.state.words[0] = g.new_tat_us;
        d.expire_at_us = g.new_tat_us;
    }
    return d;
}

// Async mode: a node sends per key the units it charged and how long ago
// the first of them was; Redis moves the global funnel on by them and
// answers with its TAT, as a time to live.
class GcraSync final : public Syncing {
  public:
    SyncLayout layout(const Policy &policy) const noexcept override
    {
        return {&lua::gcra_sync, 2, policy.rate_varies ? 3u : 2u, 0, 1};
    }

    // T (0 where each key sends its own), and the grace: how long Redis
    // keeps a key past its TAT, so that units sent up to that late still
    // find it.
    void head_args(const Policy &policy, int64_t *out) const noexcept override
    {
        out[0] = policy.rate_varies ? 0 : policy.emission_interval_us;
        out[1] = grace(policy);
    }

    // Ages are capped at the grace: units kept through an outage are placed
    // no further back than that.
    void key_args(const Policy &policy, const PendingUnits &units,
                  int64_t sent_at_us, int64_t *out) const noexcept override
    {
        out[0] = units.units;
        out[1] = units.units == 0
            ? 0
            : std::clamp<int64_t>(sent_at_us - units.since, 0, grace(policy));
        if (policy.rate_varies) {
            out[2] = policy.emission_interval_us;
        }
    }

    bool apply(const Policy &policy, const int64_t *, const int64_t *values,
               int64_t    sent_at_us, int64_t,
               StoredKey &key) const noexcept override
    {
        key.state.words[0] =
            synced_tat(sent_at_us, values[0], policy.emission_interval_us,
                       key.pending.units);
        key.expire_at_us = key.state.words[0];
        return true;
    }

    PendingUnits charge(const Policy &, PendingUnits pending, int64_t cost,
                        int64_t now_us,
                        const KeyState &) const noexcept override
    {
        if (pending.units == 0) {
            pending.since = now_us;
        }
        pending.units += cost;
        return pending;
    }

    // The whole units the settle moved the TAT by (a refund that stopped
    // at now gives back the whole units it moved: a fraction stays here).
    PendingUnits settle(const Policy &policy, PendingUnits pending,
                        const KeyState &before, const KeyState &after,
                        int64_t now_us) const noexcept override
    {
        const int64_t moved_us =
            after.words[0] - std::max(before.words[0], now_us);
        const int64_t units = moved_us / policy.emission_interval_us;

        if (units == 0) {
            return pending;
        }
        if (pending.units == 0) {
            pending.since = now_us;
        }
        pending.units += units;
        return pending;
    }

    // The counts add up; the earlier start stays.
    PendingUnits merge(const Policy &, PendingUnits kept,
                       PendingUnits since_taken) const noexcept override
    {
        PendingUnits p = since_taken;
        if (kept.units
            && (since_taken.units == 0 || kept.since < since_taken.since)) {
            p.since = kept.since;
        }
        p.units += kept.units;
        return p;
    }

    int64_t total(const PendingUnits &pending) const noexcept override
    {
        return std::abs(pending.units);
    }

  private:
    static int64_t grace(const Policy &policy) noexcept
    {
        return 2 * policy.sync_interval_us;
    }
};

const GcraSync kGcraSync;

class Gcra final : public Algorithm {
  public:
    constexpr Gcra() noexcept : Algorithm("gcra", false, false, true) {}

    bool configure(Policy &p, Message &why) const noexcept override
    {
        p.limit = p.burst + 1;
        p.window_us = 0;
        // Bound the tolerance (to about 71 years) so that "now + 2 *
        // tolerance" stays below 2^53 microseconds: exact in int64_t here
        // and in the doubles of Redis's Lua, which must give the same
        // answers.
        if (__builtin_mul_overflow(p.emission_interval_us, p.limit,
                                   &p.window_us)
            || p.window_us > kMaxToleranceUs)
        {
            why.format("burst is too large for this rate (rate=%s burst=%lld)",
                       RateText(p.rate).text, static_cast<long long>(p.burst));
            return false;
        }
        return true;
    }

    Decision decide(const Policy &policy, const KeyState *current,
                    const int64_t *, int64_t              now_us,
                    int64_t cost) const noexcept override
    {
        return gcra_decision(policy, current, now_us, cost);
    }

    // A zeroed TAT, a fresh key's, reads as now.
    void settle(const Policy &policy, int64_t delta_units, int64_t,
                int64_t now_us, KeyState &state, int64_t &expire_at_us,
                int64_t *) const noexcept override
    {
        state.words[0] = gcra_settle(policy.emission_interval_us,
                                     state.words[0], delta_units, now_us);
        expire_at_us = state.words[0];
    }

    StrictScripts strict_scripts() const noexcept override
    {
        return {&lua::gcra, &lua::gcra_refund, 0, &lua::gcra_charge};
    }

    ScriptArgs decision_args(const Policy &policy,
                             int64_t       cost) const noexcept override
    {
        return {
            {policy.emission_interval_us, policy.window_us, policy.limit, cost},
            4};
    }

    ScriptArgs refund_args(const Policy &policy, int64_t cost,
                           const int64_t *) const noexcept override
    {
        return {{policy.emission_interval_us, cost, 0, 0}, 2};
    }

    ScriptArgs charge_args(const Policy &policy,
                           int64_t       units) const noexcept override
    {
        return {{policy.emission_interval_us, units, kMaxDebtUs, 0}, 3};
    }

    // A lower bound of the TAT, from every answer (an admission's
    // reset_after is the TAT it moved to, a rejection's the TAT it left):
    // the TAT only grows but for a refund, and a charge given back is
    // never remembered, so the highest bound holds. From it the zone
    // rejects by itself whatever Redis would reject for any cost, until it
    // is past, with the fields Redis would answer then.
    Decision remember(const Policy &, const KeyState *memory,
                      const ThrottleResult &answer, int64_t,
                      int64_t               sent_at_us) const noexcept override
    {
        const int64_t bound = sent_at_us + answer.reset_after_us;
        Decision      d;
        if (memory != nullptr && memory->words[0] >= bound) {
            return d; // an answer that crossed a newer one's on its way
        }
        d.store = true;
        d.state.words[0] = bound;
        d.expire_at_us = bound;
        return d;
    }

    // With no memory the zone knows nothing of the key: Redis answers,
    // even a cost that can never fit (which it does not charge), so that
    // the answer's fields are the key's, not a fresh key's.
    Decision recall(const Policy &policy, const KeyState *memory, int64_t,
                    int64_t now_us, int64_t cost) const noexcept override
    {
        if (memory == nullptr) {
            return recall_denial(nullptr, 0, {policy.limit, policy.window_us},
                                 now_us, cost);
        }
        Decision d = gcra_decision(policy, memory, now_us, cost);
        d.store = false;
        return d;
    }

    bool memory_is_state() const noexcept override { return true; }

    // decide(), settle() and remember() all expire a key at its TAT (and
    // forget_answers() zeroes both, which reads as stale the same way)
    bool expiry_is_state() const noexcept override { return true; }

    // Redis's answer as well as the zone's: both say reset_after = new_tat
    // - now for an admission.
    int64_t delay_us(const Policy &policy, const ThrottleResult &admitted,
                     int64_t cost, int64_t delay) const noexcept override
    {
        return gcra_delay_us(policy.emission_interval_us,
                             admitted.reset_after_us, cost, delay);
    }

    const Syncing *syncing() const noexcept override { return &kGcraSync; }
};

const Gcra kGcra;

} // namespace

const Algorithm &
gcra_algorithm() noexcept
{
    return kGcra;
}

} // namespace throttle
