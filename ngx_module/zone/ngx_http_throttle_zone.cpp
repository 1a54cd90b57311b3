/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The shared-memory zone: its table of keys (ngx_http_throttle_table.cpp),
 * and an async zone's records of its keys due a sync
 * (ngx_http_throttle_records.cpp), behind one set of functions. They run
 * with the pool's mutex held by their caller, but for
 * ngx_http_throttle_remember(), ngx_http_throttle_forget_answers(),
 * settle_key(), reset_key() and renew_key(), which take it themselves. How a
 * zone starts, or is kept over a reload, is in ngx_http_throttle_zone_init.cpp.
 *
 * A decision is made in two steps so that several zones can be checked
 * together and charged only if all pass: lookup (read), then, if the
 * request goes through, reserve (find room for a new key) and commit
 * (write; cannot fail). What a zone holds of a key is the core's
 * (throttle::StoredKey, and log_slots words beside it; a table's slot
 * keeps only what the algorithm needs of it). A key is decided, charged
 * and settled by the request's policy (check->policy: its plan's, where
 * the zone's rate= or burst= is a variable); its slot is laid out by the
 * zone's, which every plan of the zone shares.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_zone.h"
#include "ngx_http_throttle_params.h"

#include "throttle/plans.hpp"

void
ngx_http_throttle_lookup(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_find(check);

    check->part->decision = check->policy->decide(
        check->stored, check->log, check->now, check->part->cost);
    int64_t flight = ngx_http_throttle_flight_of(check);

    check->part->flight_wait_us = check->policy->flight_wait_us(
        flight, check->part->decision, check->now);
    check->part->flight_failed =
        throttle::Policy::flight_failed(flight, check->now);
}

/*
 * A strict zone keeps what Redis's answer lets it reject by itself
 * (throttle::Policy::remember_answer()); the request still gets Redis's
 * answer.
 */
void
ngx_http_throttle_remember(ngx_http_throttle_lookup_t *check, int64_t sent_at,
                           ngx_log_t *log) noexcept
{
    ngx_http_throttle_zone_t      *zone = check->zone;
    const throttle::ThrottleResult answer = check->part->decision.result;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    check->part->decision = check->policy->remember_answer(
        check->stored, answer, check->part->cost, sent_at, check->now);

    if (ngx_http_throttle_reserve(check, log) == NGX_OK) {
        ngx_http_throttle_commit(check);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    check->part->decision.result = answer;
}

/*
 * A strict zone is about to send a script that moves the check's key other
 * than a decision does (a refund, a settle): it forgets what it remembers
 * of the key, and the answers to scripts sent before Redis will have run
 * it, within `timeout_ms` (throttle::Policy::forget_answers()).
 */
void
ngx_http_throttle_forget_answers(ngx_http_throttle_lookup_t *check,
                                 ngx_msec_t timeout_ms) noexcept
{
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->stored) {
        zone->policy.forget_answers(*check->stored, check->now,
                                    check->now + (int64_t) timeout_ms * 1000);
        ngx_http_throttle_table_put(check);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* A table has room for any key: it evicts one if it must. */
ngx_int_t
ngx_http_throttle_reserve(ngx_http_throttle_lookup_t *check,
                          ngx_log_t                  *log) noexcept
{
    if (check->part->decision.store && check->stored == NULL) {
        ngx_http_throttle_table_reserve(check, log);
    }

    return NGX_OK;
}

void
ngx_http_throttle_release(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_table_release(check);
}

/* In an async zone, the key has been charged or settled at check->now
 * (`sends`: with units for Redis): its record keeps its units, and it is
 * due a sync (charged 0, to learn what the other nodes charged). */
static void
ngx_http_throttle_async_changed(ngx_http_throttle_lookup_t *check,
                                bool                        sends) noexcept
{
    ngx_http_throttle_zone_t *zone = check->zone;

    if (sends) {
        ngx_http_throttle_metrics_charged(zone, check->now);
    }

    ngx_http_throttle_due_keep(
        zone,
        ngx_http_throttle_slot_words(zone->sh->table, (ngx_uint_t) check->slot),
        check->tag, check->key, check->copy.pending,
        throttle::pack_rate(check->policy->rate), check->now, ngx_cycle->log);
}

void
ngx_http_throttle_commit(ngx_http_throttle_lookup_t *check) noexcept
{
    throttle::StoredKey      *key;
    ngx_http_throttle_zone_t *zone = check->zone;

    if (!check->part->decision.store) {
        return;
    }

    key = ngx_http_throttle_table_take(check, ngx_cycle->log);
    if (key == NULL) {
        return;
    }

    check->policy->commit(check->part->decision, check->now, check->part->cost,
                          *key, check->log);

    ngx_http_throttle_table_put(check);

    if (ngx_http_throttle_async(zone)) {
        ngx_http_throttle_async_changed(check, check->part->cost > 0);
    }
}

/*
 * settle=, in a local or async zone: the key the request was charged
 * `reserved` units for at reserved_at is charged settled - reserved more,
 * or given the difference back (throttle::Policy::settle()); an async key
 * sends what changed with its next sync. A key the zone no longer holds
 * gets a slot for a charge; a refund to it has nothing to give back.
 * NGX_ERROR if the zone had no room for the charge.
 */
ngx_int_t
ngx_http_throttle_settle_key(ngx_http_throttle_lookup_t *check,
                             int64_t reserved_units, int64_t settled_units,
                             int64_t reserved_at, ngx_log_t *log) noexcept
{
    ngx_int_t                 rc = NGX_OK;
    throttle::StoredKey      *key;
    ngx_http_throttle_zone_t *zone = check->zone;
    throttle::PendingUnits    pending;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->stored == NULL && settled_units > reserved_units) {
        ngx_http_throttle_table_reserve(check, log);
        rc = check->fresh_slot >= 0 ? NGX_OK : NGX_ERROR;
    }

    if (rc == NGX_OK && (check->stored || check->fresh_slot >= 0)
        && (key = ngx_http_throttle_table_take(check, log)))
    {
        pending = key->pending;

        check->policy->settle(*key, check->log, reserved_units, settled_units,
                              reserved_at, check->now);
        ngx_http_throttle_table_put(check);

        /* (only an async zone's settle moves what it has to send) */
        if (key->pending.units != pending.units
            || key->pending.since != pending.since) {
            ngx_http_throttle_async_changed(check, true);
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return rc;
}

/*
 * throttle_api's reset: the key is a fresh key from then on
 * (throttle::Policy::reset()). A local or async zone empties its slot,
 * and an async key's record goes with its units not synced yet (their
 * number is returned); a strict zone keeps a fence there until Redis will
 * have deleted the key (answered_by), so that it remembers none of the
 * answers to scripts sent before, which tell of the key before the reset.
 * The caller deletes the key in Redis.
 */
int64_t
ngx_http_throttle_reset_key(ngx_http_throttle_lookup_t *check,
                            int64_t answered_by, ngx_log_t *log) noexcept
{
    int64_t                  *words, units = 0;
    throttle::StoredKey       reset, *key;
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    reset = check->stored ? *check->stored : throttle::StoredKey{};

    if (zone->policy.reset(reset, check->now, answered_by)) {
        /* a key the zone does not hold gets a slot for its fence: a
         * script of it may be on its way */
        key = ngx_http_throttle_table_take(check, log);
        if (key) {
            *key = reset;
            ngx_http_throttle_table_put(check);
        }

    } else if ((words = ngx_http_throttle_table_words(zone, check->tag))) {
        units = ngx_http_throttle_record_remove(zone, words);
        ngx_http_throttle_table_drop(zone, check->tag);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return units;
}
