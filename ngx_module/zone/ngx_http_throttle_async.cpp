/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Async mode: the zone decides every request at once, as a local zone
 * does, and remembers per key the units it charged ("pending"). Every
 * sync_interval one worker of the nginx (whichever claims the zone first)
 * takes the keys touched since the last sync and sends them to Redis in
 * one pipelined batch of calls of the algorithm's sync script
 * (throttle::Policy::sync_layout()); Redis adds them to the global state
 * and answers with it, which replaces the zone's view of each key. No
 * request ever waits for Redis.
 *
 * A key due a sync has a record (ngx_http_throttle_records.cpp) with its
 * units and its name, in the zone's "dirty" queue, least recently charged
 * first. When Redis cannot be reached the units stay pending in the zone
 * (bounded by the zone's size: a key evicted before it was synced loses
 * them, and they are counted) and go out with the next sync that
 * succeeds.
 *
 * A worker shutting down gracefully (a reload, a binary upgrade, a quit)
 * sends the units pending in the zone before it exits: after an upgrade
 * or a quit no worker of this nginx would ever send them.
 */

#include "ngx_http_throttle_async_round.h"
#include "ngx_http_throttle_zone_metrics.h"

#include "throttle/redis.hpp"
#include "throttle/sync_schedule.hpp"

#include <algorithm>

static void ngx_http_throttle_async_tick(ngx_event_t *ev) noexcept;

/* How often this worker looks whether the zone's sync is due
 * (throttle::sync_tick_ms()). */
static ngx_msec_t
ngx_http_throttle_async_tick_ms(ngx_http_throttle_zone_t *zone) noexcept
{
    return (ngx_msec_t) throttle::sync_tick_ms(zone->policy.sync_interval_us);
}

static void
ngx_http_throttle_async_schedule(ngx_http_throttle_zone_t *zone) noexcept
{
    if (!ngx_http_throttle_async_exiting() && !ngx_terminate) {
        ngx_add_timer(zone->sync_timer, ngx_http_throttle_async_tick_ms(zone));
    }
}

/* Under the zone's lock: whether the record's last sync may be skipped
 * (throttle::skips_last_sync()), by its key's state. */
static bool
ngx_http_throttle_async_skips(ngx_http_throttle_zone_t   *zone,
                              ngx_http_throttle_record_t *rec,
                              int64_t                     now) noexcept
{
    int64_t            *words;
    throttle::StoredKey held;

    if (rec->sync_rounds != 1 || rec->pending.units != 0) {
        return false;
    }

    words = ngx_http_throttle_table_words(zone, rec->tag);
    if (words) {
        zone->policy.load_slot(words, held);
    }

    return throttle::skips_last_sync(rec->sync_rounds, rec->pending.units,
                                     held.expire_at_us, now);
}

/* Under the zone's lock: how many keys are due a sync (at most
 * NGX_HTTP_THROTTLE_ASYNC_MAX, least recently charged first) and the bytes of
 * their names, in *size. */
static ngx_uint_t
ngx_http_throttle_async_due(ngx_http_throttle_zone_t *zone, int64_t now,
                            size_t *size) noexcept
{
    ngx_uint_t                  n = 0;
    ngx_queue_t                *q, *next;
    ngx_http_throttle_record_t *rec;

    *size = 0;

    for (q = ngx_queue_head(&zone->sh->dirty);
         q != ngx_queue_sentinel(&zone->sh->dirty)
         && n < NGX_HTTP_THROTTLE_ASYNC_MAX;
         q = next)
    {
        next = ngx_queue_next(q);
        rec = ngx_queue_data(q, ngx_http_throttle_record_t, dirty);

        if (ngx_http_throttle_async_skips(zone, rec, now)) {
            ngx_http_throttle_record_done(
                zone, rec, ngx_http_throttle_table_words(zone, rec->tag));
            continue;
        }

        *size += rec->len;
        n++;
    }

    return n;
}

/* Under the zone's lock: takes the keys due a sync, in that order, with
 * their units; a key stays due if it has a round left, else its record
 * goes. */
static ngx_http_throttle_async_round_t *
ngx_http_throttle_async_take(ngx_http_throttle_zone_t *zone,
                             int64_t                   now) noexcept
{
    size_t                           size;
    u_char                          *p;
    ngx_uint_t                       n;
    ngx_queue_t                     *q;
    ngx_http_throttle_record_t      *rec;
    ngx_http_throttle_async_round_t *round;
    ngx_http_throttle_async_key_t   *k;

    n = ngx_http_throttle_async_due(zone, now, &size);
    if (n == 0) {
        return NULL;
    }

    p = (u_char *) ngx_alloc(sizeof(ngx_http_throttle_async_round_t)
                                 + n * sizeof(ngx_http_throttle_async_key_t)
                                 + size,
                             ngx_cycle->log);
    if (p == NULL) {
        return NULL;
    }

    round = (ngx_http_throttle_async_round_t *) p;
    round->zone = zone;
    round->nkeys = n;
    round->calls_in_flight = 0;
    round->failed = 0;
    round->keys = (ngx_http_throttle_async_key_t *) (round + 1);
    p = (u_char *) (round->keys + n);

    for (k = round->keys; k < round->keys + n; k++) {
        q = ngx_queue_head(&zone->sh->dirty);
        rec = ngx_queue_data(q, ngx_http_throttle_record_t, dirty);

        k->data = p;
        k->len = rec->len;
        k->hashed = rec->hashed;
        k->tag = rec->tag;
        k->units = rec->pending;
        k->rate = ngx_http_throttle_record_rate(zone, rec);
        p = ngx_cpymem(p, rec->data, rec->len);

        ngx_http_throttle_metrics_pending(
            zone, -zone->policy.pending_total(rec->pending));
        rec->pending.units = 0;

        if (--rec->sync_rounds) {
            ngx_queue_remove(q);
            ngx_queue_insert_tail(&zone->sh->dirty, q);

        } else {
            ngx_http_throttle_record_done(
                zone, rec, ngx_http_throttle_table_words(zone, rec->tag));
        }
    }

    round->took_all = ngx_http_throttle_metrics_taken(zone);

    return round;
}

/* Under the zone's lock: whether another round of this zone is in flight
 * (a live claim; it lapses if its worker dies). */
static bool
ngx_http_throttle_async_claimed(ngx_http_throttle_shctx_t *sh,
                                int64_t                    now) noexcept
{
    return sh->syncer != 0 && now < sh->syncer_until;
}

/* Under the zone's lock: whether this worker syncs the zone now, and if
 * so the keys it takes. No two rounds are ever in flight at once, so that
 * a key's syncs reach Redis in the order they were taken. The round is due
 * within a millisecond (timers fire on whole, cached milliseconds); a
 * worker whose own connections are backing off leaves it to another one,
 * or to its next tick. A worker shutting down takes what is due at once,
 * whatever the schedule: this is its last tick. */
static ngx_http_throttle_async_round_t *
ngx_http_throttle_async_claim(ngx_http_throttle_zone_t *zone,
                              int64_t                   now) noexcept
{
    ngx_http_throttle_shctx_t       *sh = zone->sh;
    ngx_http_throttle_async_round_t *round;

    if (ngx_http_throttle_async_claimed(sh, now)) {
        return NULL;
    }

    if (!ngx_http_throttle_async_exiting()) {
        if (!throttle::sync_due(sh->next_round, now)
            || ngx_http_throttle_redis_backing_off(zone->redis))
        {
            return NULL;
        }

        sh->next_round = throttle::next_sync_round(
            sh->next_round, zone->policy.sync_interval_us, now);
    }

    round = ngx_http_throttle_async_take(zone, now);

    if (round) {
        sh->syncer = ngx_pid;
        sh->syncer_until = throttle::sync_claim_until(
            now, zone->policy.sync_interval_us, (int64_t) zone->redis->timeout);
    }

    return round;
}

/* On a Cluster a call's keys must share a slot: the round's keys are put
 * in the order of their shards (throttle::async_shard()), so that a call
 * takes keys of one shard. */
static void
ngx_http_throttle_async_by_shard(
    ngx_http_throttle_async_round_t *round) noexcept
{
    ngx_http_throttle_async_key_t *k, *end = round->keys + round->nkeys;

    for (k = round->keys; k < end; k++) {
        k->shard = (u_char) throttle::async_shard(
            throttle::ZoneKey::stored(k->data, k->len, k->hashed));
    }

    std::sort(round->keys, end,
              [](const ngx_http_throttle_async_key_t &a,
                 const ngx_http_throttle_async_key_t &b) {
                  return a.shard < b.shard;
              });
}

/* How many keys from "first" on go in one call: up to
 * NGX_HTTP_THROTTLE_ASYNC_BATCH, of one shard on a Cluster. */
static ngx_uint_t
ngx_http_throttle_async_batch(ngx_http_throttle_async_round_t *round,
                              ngx_uint_t first, bool one_shard) noexcept
{
    ngx_uint_t n, max;

    max = ngx_min(round->nkeys - first,
                  (ngx_uint_t) NGX_HTTP_THROTTLE_ASYNC_BATCH);

    for (n = 1; n < max; n++) {
        if (one_shard
            && round->keys[first + n].shard != round->keys[first].shard) {
            break;
        }
    }

    return n;
}

/* Sends the round's keys in calls of one batch each. */
static void
ngx_http_throttle_async_send_round(ngx_http_throttle_async_round_t *round,
                                   int64_t now) noexcept
{
    ngx_uint_t first, n;
    bool one_shard = ngx_http_throttle_redis_clustered(round->zone->redis);

    round->sent_at = now;
    round->calls_in_flight = 1; /* until every call is out */

    if (one_shard) {
        ngx_http_throttle_async_by_shard(round);
    }

    for (first = 0; first < round->nkeys; first += n) {
        n = ngx_http_throttle_async_batch(round, first, one_shard);
        ngx_http_throttle_async_send(round, first, n);
    }

    if (--round->calls_in_flight == 0) {
        ngx_http_throttle_async_finish(round);
    }
}

static void
ngx_http_throttle_async_tick(ngx_event_t *ev) noexcept
{
    ngx_http_throttle_zone_t *zone = (ngx_http_throttle_zone_t *) ev->data;
    ngx_http_throttle_async_round_t *round;
    bool                             last_waits;
    int64_t                          now = zone->policy.now_us();

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* drained keys go even without traffic to sweep them */
    ngx_http_throttle_table_sweep(zone, 100, now);

    round = ngx_http_throttle_async_claim(zone, now);

    /* a worker shutting down while a round is in flight (its own, or a new
     * worker's after a reload) takes its last one when that is done */
    last_waits = round == NULL && ngx_http_throttle_async_exiting()
        && ngx_http_throttle_async_claimed(zone->sh, now);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (round) {
        ngx_http_throttle_async_send_round(round, now);
    }

    if (last_waits && !ngx_terminate) {
        ngx_add_timer(ev, ngx_http_throttle_async_tick_ms(zone));
        return;
    }

    ngx_http_throttle_async_schedule(zone);
}

ngx_int_t
ngx_http_throttle_async_init_worker(ngx_cycle_t              *cycle,
                                    ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_event_t *ev;

    ev = (ngx_event_t *) ngx_pcalloc(cycle->pool, sizeof(ngx_event_t));
    if (ev == NULL) {
        return NGX_ERROR;
    }

    ev->handler = ngx_http_throttle_async_tick;
    ev->data = zone;
    ev->log = cycle->log;
    /* not cancelable: a worker shutting down waits for its last tick, and
     * that tick's calls for their replies (or their timeout) */

    zone->sync_timer = ev;

    /* workers tick out of step; whichever finds the sync due claims it */
    ngx_add_timer(
        ev,
        1 + (ngx_msec_t) ngx_random() % ngx_http_throttle_async_tick_ms(zone));

    return NGX_OK;
}
