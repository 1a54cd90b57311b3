// SPDX-License-Identifier: BSD-2-Clause
// A zone's policy: its algorithm, rate and burst, and where its state
// lives. make_policy() makes it once from the zone's parameters, applying
// the configuration rules; then it is read-only, and it is the one
// interface through which the nginx glue reaches the algorithm, whatever
// that is: deciding and committing a key, the script calls and the memory
// of Redis's rejections of strict zones, the syncs of async zones, and what
// a reload may change.
#pragma once

#include "throttle/algorithm.hpp"
#include "throttle/decision.hpp"
#include "throttle/parse.hpp"
#include "throttle/redis.hpp"
#include "throttle/result.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace throttle {

// Where a zone's state lives: in the zone alone (local), in Redis, which
// decides every request (strict), or in the zone, synced with Redis every
// sync interval (async).
enum class Mode { local, strict, async };

// A zone's parameters, as throttle_zone gives them.
struct ZoneParams {
    const Algorithm       *algorithm = nullptr; // null: not given, GCRA
    Rate                   rate{};              // count 0: not given
    std::optional<int64_t> burst;
    std::optional<int64_t> log_max; // only some algorithms take it
    Mode                   mode = Mode::local;
    int64_t                sync_interval_us = 0; // async zones
    // concurrent=: requests in flight instead of a rate, each holding a
    // place for a lease that its worker renews while it runs
    std::optional<int64_t> concurrent;
    std::optional<int64_t> lease_us;
    // rate= or burst= given by a variable, read per request (rate or
    // burst above is then not given)
    bool rate_varies = false;
    bool burst_varies = false;
};

// A concurrent= zone's default lease: a worker renews its requests'
// leases every quarter of it.
constexpr int64_t kDefaultLeaseUs = 60'000'000;

// The shortest lease: its quarter, the bucket, is 250 ms or more, so that
// a bucket's number (microseconds since the epoch over it) fits the 40
// bits a word keeps for it until the year 10,000.
constexpr int64_t kMinLeaseUs = 1'000'000;

// The most places a key may have: a bucket's count fits in 24 bits.
constexpr int64_t kMaxPlaces = 1'000'000;

// The default and the largest cap on a sliding_log zone's limit: memory
// per key grows with it (8 bytes a slot in a zone, a sorted-set member in
// Redis).
constexpr int64_t kDefaultLogMax = 1000;
constexpr int64_t kMaxLogMax = 100000;

// The largest burst= accepted; beyond it the tolerance would not fit the
// microsecond arithmetic for the slowest rates.
constexpr int64_t kMaxBurst = 1'000'000'000;

// The largest cost= accepted.
constexpr int64_t kMaxCost = 1'000'000'000;

// The rate a zone's template has when its rate= is a variable: the
// smallest count, so that the configuration rules refuse only what no
// value of the variable could make right (a constant burst= beyond
// sliding_log's log_max=); per second, where GCRA refuses no burst.
constexpr Rate kTemplateRate{1, 1'000'000};

// A throttle line without delay=: no request waits (limit_req's nodelay).
constexpr int64_t kNoDelay = INT64_MAX;

// The largest delay= accepted, as for burst=: a delay of burst or more
// never holds a request back.
constexpr int64_t kMaxDelay = kMaxBurst;

// A script call for one key: the script, and its ARGV after the key.
struct ScriptCall {
    const Script *script;
    ScriptArgs    args;
};

struct Policy {
    const Algorithm *algorithm = &default_algorithm();
    Rate             rate{};
    int64_t          burst = 0;
    Mode             mode = Mode::local;
    int64_t          sync_interval_us = 0;
    int64_t          log_max = kDefaultLogMax;

    // What the algorithm derives from them (Algorithm::configure()):
    // units a fresh key admits at once (the draft's "q")
    int64_t limit = 0;
    // the time a drained key takes to be fresh again (the draft's "w")
    int64_t window_us = 0;
    // the time one unit takes to drain: the rate's period / count
    int64_t emission_interval_us = 0;
    // words a key keeps beside its state (a local sliding_log's ring)
    int64_t log_slots = 0;
    // concurrent= zones: how long a place outlives its request's last
    // renewal (0: a zone of a rate)
    int64_t lease_us = 0;
    // Whether rate= or burst= is a variable (docs/plans.md): then each
    // request has a policy of its own, made from the zone's by make_plan()
    // (plans.hpp), which keeps these flags; the zone's own, its template,
    // has the smallest value for each (kTemplateRate, burst 0) and decides
    // no request.
    bool rate_varies = false;
    bool burst_varies = false;

    // A concurrent= zone: a request it admits holds a place until it ends
    // (then settle() with 1 unit reserved and none used gives it back),
    // and its worker renews the place every renew_interval_us() meanwhile
    // (renew(), renew_call()).
    bool    holds_places() const noexcept { return lease_us > 0; }
    int64_t renew_interval_us() const noexcept { return lease_us / 4; }
    bool    varies() const noexcept { return rate_varies || burst_varies; }

    // --- every mode

    // The zone's clock: every time it stores is of this clock.
    int64_t now_us() const noexcept;

    // Decides a request of `cost` at now_us against what the zone holds of
    // its key (`key`: null if nothing; `log`: its log_slots words): by the
    // algorithm in local and async zones, from the memory of Redis's
    // rejections in strict ones, where a decision that is not limited
    // means "ask Redis".
    Decision decide(const StoredKey *key, const int64_t *log, int64_t now_us,
                    int64_t cost) const noexcept;

    // Writes a decision that passed (decision.store) into the key, and in
    // an async zone counts its units for the next sync. A new key comes
    // zeroed.
    void commit(const Decision &decision, int64_t now_us, int64_t cost,
                StoredKey &key, int64_t *log) const noexcept;

    // A local or async zone, once a request it charged `reserved_units`
    // at reserved_at_us has ended: settles the key to the units the
    // request really used (`settled_units`; a negative count is none), as
    // Algorithm::settle() says: the difference is charged at now_us even
    // beyond the limit, or the part of the reservation that still counts
    // is given back. A key the zone holds stale, or a new one (zeroed, as
    // for commit()), is a fresh key's: a charge makes it hold just that
    // charge, a refund leaves it as it is. An async zone also counts what
    // the settle changed for the next sync (Syncing::settle()); a strict
    // one settles in Redis (settle_call()), and its key is left as it is.
    void settle(StoredKey &key, int64_t *log, int64_t reserved_units,
                int64_t settled_units, int64_t reserved_at_us,
                int64_t now_us) const noexcept;

    // A concurrent= zone (local): the place of a request still in flight,
    // taken or last renewed at held_at_us, lives on for another lease.
    // Returns the time to renew it from next (now_us), or -1 if its lease
    // had ended (the place may have gone to another request: it is not
    // taken back).
    int64_t renew(StoredKey &key, int64_t *log, int64_t held_at_us,
                  int64_t now_us) const noexcept;

    // delay=: how long a request this zone admitted (`result`: its answer,
    // or Redis's, for `cost` units) waits before it goes on, when its line
    // lets `delay` units be ahead of a request that goes at once (kNoDelay:
    // none waits). 0 for a rejected request, and for an algorithm that
    // cannot delay.
    int64_t delay_us(const ThrottleResult &result, int64_t cost,
                     int64_t delay) const noexcept;

    // --- strict zones

    ScriptCall decision_call(int64_t cost) const noexcept;
    // Anything but the decision script's reply is an error, never a
    // decision.
    ScriptReply read_decision(const redisReply *reply) const noexcept;
    // Gives back a charge Redis made for a request another zone refused.
    ScriptCall refund_call(int64_t       cost,
                           const int64_t tokens[2]) const noexcept;
    // settle=: settles a request Redis charged (`tokens`: as the decision
    // script returned them), once it has ended, by `delta_units` (the
    // units it used less those reserved: neither 0 nor INT64_MIN), at
    // Redis's clock and by Algorithm::settle()'s rules: a refund of what
    // of the charge still counts (the refund script), or a charge beyond
    // the limit, saturating as settle() does (the charge script).
    ScriptCall settle_call(int64_t       delta_units,
                           const int64_t tokens[2]) const noexcept;
    // A concurrent= zone: keeps the place of a request still in flight
    // (`tokens`: as the decision script returned them) for another lease;
    // the script answers 1 if it did, 0 if the lease had ended.
    ScriptCall renew_call(const int64_t tokens[2]) const noexcept;
    // What the zone makes of Redis's answer to `cost` units sent at
    // sent_at_us for a key it holds as `key` (null if not): a decision to
    // commit. Its store is false if there is nothing to write: nothing
    // changes, or a memory to forget or one already stale at now_us for a
    // key the zone does not hold. Every answer but that of a charge given
    // back (Policy::refund_call()) belongs here, so that the zone's next
    // rejections answer from Redis's newest word.
    Decision remember_answer(const StoredKey *key, const ThrottleResult &answer,
                             int64_t cost, int64_t sent_at_us,
                             int64_t now_us) const noexcept;
    // A script that moves the key other than a decision does (a refund,
    // a settle's charge or refund) is sent at now_us, and Redis will have
    // run it by answered_by_us (or it timed out): what the zone remembers
    // of the key, and the answers to scripts sent before then, may tell of
    // the key before the move. remember_answer() keeps none of them (a
    // strict key's pending.since is that time), so that the zone never
    // rejects what Redis would admit, nor with figures Redis would not
    // give.
    void forget_answers(StoredKey &key, int64_t now_us,
                        int64_t answered_by_us) const noexcept;

    // One flight per key: while a decision script for a key is in flight
    // from this nginx (its "flight": when it will have timed out), the
    // nginx's other requests that would take the last unit the zone knows
    // of wait for its answer rather than all go to Redis at once (a
    // flooded key), and are decided again from the memory it updates:
    // rejected if it proves Redis would reject them, else one of them is
    // the next flight. A request whose memory shows room for more than
    // itself goes to Redis at once, as before: several may be admitted at
    // once. The glue keeps a zone's flights apart from its keys' slots
    // (FlightEntry, table.hpp); a flight it has lost (another key's took
    // its entry) only sends more requests to Redis, never rejects one.
    //
    // How long a request that decide() let go to Redis (`decided`) may
    // wait for the key's flight (`flight_us`, 0: none), at most (until it
    // times out): 0 if it goes to Redis now.
    int64_t flight_wait_us(int64_t flight_us, const Decision &decided,
                           int64_t now_us) const noexcept;
    // The request goes to Redis: its script is the key's flight until
    // until_us (when it was sent, plus the backend's timeout). The key's
    // flight from now on (0 in a zone that has none).
    int64_t take_flight(int64_t flight_us, int64_t until_us) const noexcept;
    // The flight that ends at until_us is over (answered, failed, or its
    // request gone): the key has none (0), unless another has taken it
    // since; a flight that failed (no answer in time, or an error) leaves
    // its mark (a negative flight), which no request waits for.
    int64_t land_flight(int64_t flight_us, int64_t until_us,
                        bool failed) const noexcept;
    // Whether the key's last flight failed at now_us: it landed so, or
    // its time passed without an answer (its request's own timer may not
    // have fired yet). A request that waited for it fails as it did
    // (RequestDecision::end_pass()), rather than wait a Redis timeout
    // more for a script of its own.
    static bool flight_failed(int64_t flight_us, int64_t now_us) noexcept
    {
        return flight_us < 0 || (flight_us > 0 && flight_us <= now_us);
    }

    // --- resetting a key (throttle_api's DELETE): fresh from then on

    // What the zone keeps of a key it resets at now_us (`key`: as it holds
    // it, or a new key's zeroed state), Redis having deleted the key's
    // state (reset_call()) by answered_by_us, or given up: true if the
    // key's slot stays, as `key` now is; false if it goes. A strict zone
    // keeps a fence there, as forget_answers() does: the answers to the
    // scripts sent before the reset tell of the key before it, and are
    // not remembered; the slot frees itself at answered_by_us. A local or
    // async zone's slot goes, and with it an async key's units not synced
    // yet: they were charged before the reset, and sending them would
    // charge the fresh key.
    bool reset(StoredKey &key, int64_t now_us,
               int64_t answered_by_us) const noexcept;
    // The script that deletes the key's state in Redis (KEYS[1]: its
    // name, tagged as redis_hash_tag() says), in strict and async zones;
    // a call with no script in a local zone, which has none there.
    ScriptCall reset_call() const noexcept;
    // How a key's name in Redis is tagged: by the key in a strict zone, by
    // the zone's shard in an async one (docs/modes.md).
    HashTag redis_hash_tag() const noexcept;

    // --- a key's slot in a zone's table

    // Words a slot keeps beside the key's tag: the key's state, as little
    // of it as the algorithm needs (GCRA: its TAT, which is also its
    // expiry, and a last word: 2; the others: the expiry, two state words
    // and the last word: 4), then log_slots words. The last word is a
    // strict zone's fence (pending.since), and an async zone's reference
    // to the record of a key due a sync (slot_record()), which holds its
    // pending units and its name; a local zone leaves it 0. The same in
    // every mode, so that a reload between them that keeps the keys
    // (reload_refusal()) keeps the slots' layout.
    int64_t slot_words() const noexcept;
    // An async zone's load_slot() leaves the pending units as they come
    // (they are the record's) and store_slot() leaves the reference.
    void load_slot(const int64_t *slot, StoredKey &key) const noexcept;
    void store_slot(const StoredKey &key, int64_t *slot) const noexcept;
    // When the slot may go to another key: its key is stale (the same as a
    // fresh one) and fences no answer (forget_answers()) from then on. (An
    // async key still due a sync is the glue's to keep: slot_record().)
    int64_t slot_free_at(const int64_t *slot) const noexcept;
    // The key's log_slots words, after the state's.
    int64_t *slot_log(int64_t *slot) const noexcept;
    // An async zone: the word of the slot that refers to its key's record
    // while the key is due a sync (0: none); null in other modes.
    int64_t *slot_record(int64_t *slot) const noexcept;
    // How many of a new zone's `free_pages` its table takes: all but one
    // (for what the slab allocates later); an async zone leaves a quarter
    // of them to the records of its keys due a sync.
    size_t table_pages(size_t free_pages) const noexcept;

    // --- async zones

    SyncLayout sync_layout() const noexcept;
    void       sync_head_args(int64_t *out) const noexcept;
    void       sync_key_args(const PendingUnits &units, int64_t sent_at_us,
                             int64_t *out) const noexcept;
    // Redis's answer for one key (see Syncing::apply); false if the key is
    // left as it was.
    bool         apply_sync(const int64_t *reply_head, const int64_t *values,
                            int64_t sent_at_us, int64_t now_us,
                            StoredKey &key) const noexcept;
    PendingUnits merge_pending(PendingUnits kept,
                               PendingUnits since_taken) const noexcept;
    int64_t      pending_total(const PendingUnits &pending) const noexcept;
};

// The configuration rules: a policy, or why the parameters cannot make
// one (the text is in `why`, after the zone's name in the message).
Parsed<Policy> make_policy(const ZoneParams &params, Message &why) noexcept;

// Why a throttle line of this zone cannot have delay= (the text is in
// `why`, after the zone's name in the message), or null if it can.
const char *delay_refusal(const Policy &policy, Message &why) noexcept;

// Why a throttle line of this zone cannot have cost= (or settle=), as
// delay_refusal() says it, or null if it can.
const char *cost_refusal(const Policy &policy, Message &why) noexcept;
const char *settle_refusal(const Policy &policy, Message &why) noexcept;

// Why a key of this zone cannot be reset (throttle_api's DELETE), as
// delay_refusal() says it, or null if it can.
const char *reset_refusal(const Policy &policy, Message &why) noexcept;

// The reload rules: why a zone that kept its name and size cannot keep its
// keys under its new policy (the text is in `why`), or null if it can.
const char *reload_refusal(const Policy &was, const Policy &now,
                           Message &why) noexcept;

} // namespace throttle
