/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Async mode's script calls: a call carries up to
 * NGX_HTTP_THROTTLE_ASYNC_BATCH keys of a round, with ARGV as the zone's
 * algorithm lays it out (throttle::Policy::sync_layout()); its reply
 * replaces the zone's view of each key, and its failure keeps the keys due
 * a sync.
 */

#include "ngx_http_throttle_async_round.h"
#include "ngx_http_throttle_zone_metrics.h"

#include "throttle/redis.hpp"
#include "throttle/sync_schedule.hpp"

#include <hiredis/hiredis.h>

/* Under the zone's lock: the rate of a key of the round (in the slot
 * `words`): its record's if it was charged since the round took it (a
 * later plan's, which its new units were charged at), else the round's. */
static uint32_t
ngx_http_throttle_async_rate(ngx_http_throttle_zone_t *zone, int64_t *words,
                             ngx_http_throttle_async_key_t *k) noexcept
{
    ngx_http_throttle_record_t *rec = ngx_http_throttle_record_of(zone, words);

    return rec ? ngx_http_throttle_record_rate(zone, rec) : k->rate;
}

/* Under the zone's lock: Redis's answer replaces the view of each key, plus
 * what this node charged since the batch left (its record's units). */
static void
ngx_http_throttle_async_apply(ngx_http_throttle_async_round_t *round,
                              ngx_uint_t first, ngx_uint_t n,
                              const int64_t *answer, int64_t now) noexcept
{
    int64_t                       *words;
    ngx_uint_t                     i;
    throttle::StoredKey            key;
    ngx_http_throttle_async_key_t *k;
    ngx_http_throttle_zone_t      *zone = round->zone;
    const throttle::SyncLayout     layout = zone->policy.sync_layout();

    for (i = 0; i < n; i++) {
        k = &round->keys[first + i];
        words = ngx_http_throttle_table_words(zone, k->tag);

        if (words == NULL) {
            continue; /* evicted meanwhile; Redis has its units */
        }

        zone->policy.load_slot(words, key);
        ngx_http_throttle_record_load(zone, words, &key);

        if (throttle::synced_plan(zone->policy,
                                  ngx_http_throttle_async_rate(zone, words, k))
                .apply_sync(answer,
                            answer + layout.reply_head
                                + i * layout.reply_per_key,
                            round->sent_at, now, key))
        {
            zone->policy.store_slot(key, words);
        }
    }
}

/* Under the zone's lock: the keys are due a sync again, with their units
 * if these are kept; kept units whose key is gone are counted as
 * dropped. */
static void
ngx_http_throttle_async_keep(ngx_http_throttle_async_round_t *round,
                             ngx_uint_t first, ngx_uint_t n,
                             throttle::FailedSync failed) noexcept
{
    bool kept = failed == throttle::FailedSync::units_kept;

    uint32_t                       rate;
    int64_t                       *words;
    ngx_uint_t                     i;
    throttle::StoredKey            key;
    ngx_http_throttle_async_key_t *k;
    ngx_http_throttle_zone_t      *zone = round->zone;
    int64_t                        now = zone->policy.now_us();

    for (i = 0; i < n; i++) {
        k = &round->keys[first + i];
        words = ngx_http_throttle_table_words(zone, k->tag);

        if (words == NULL) {
            if (kept) {
                zone->sh->dropped_units += zone->policy.pending_total(k->units);
                ngx_http_throttle_metrics_lost(
                    zone, zone->policy.pending_total(k->units));
            }
            continue;
        }

        key.pending = throttle::PendingUnits{};
        ngx_http_throttle_record_load(zone, words, &key);
        rate = ngx_http_throttle_async_rate(zone, words, k);

        if (kept) {
            if (k->units.units == 0
                && ngx_http_throttle_record_of(zone, words) == NULL) {
                continue;
            }
            key.pending = throttle::synced_plan(zone->policy, rate)
                              .merge_pending(k->units, key.pending);
        }

        /* (not kept: due again to read the state) */
        ngx_http_throttle_due_keep(
            zone, words, k->tag,
            throttle::ZoneKey::stored(k->data, k->len, k->hashed), key.pending,
            rate, now, ngx_cycle->log);
    }
}

/* Reads a sync call's reply into *answer (allocated; the caller frees
 * it): NULL, or what was wrong. */
static const char *
ngx_http_throttle_async_read(ngx_http_throttle_zone_t *zone,
                             const redisReply *reply, ngx_uint_t n,
                             int64_t **answer) noexcept
{
    throttle::SyncLayout layout = zone->policy.sync_layout();
    size_t               size = layout.reply_head + n * layout.reply_per_key;

    *answer = (int64_t *) ngx_alloc(size * sizeof(int64_t), ngx_cycle->log);
    if (*answer == NULL) {
        return "out of memory";
    }

    return throttle::decode_sync_reply(reply, size, *answer);
}

/* An outage is told when it starts and when it ends, not per sync. */
static void
ngx_http_throttle_async_report(ngx_http_throttle_zone_t *zone, const char *err,
                               ngx_uint_t failing, int64_t dropped) noexcept
{
    if (err && failing == 0) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "throttle zone \"%V\": cannot sync with Redis (%s); "
                      "deciding from the zone alone, and keeping what it "
                      "charges for a later sync",
                      &zone->name, err);

    } else if (err == NULL && failing) {
        ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                      "throttle zone \"%V\": in sync with Redis again after "
                      "%ui failed syncs; %L units were dropped with keys "
                      "evicted meanwhile",
                      &zone->name, failing, dropped);
    }
}

/* Every call of the round is done: the claim ends. */
void
ngx_http_throttle_async_finish(ngx_http_throttle_async_round_t *round) noexcept
{
    ngx_http_throttle_zone_t *zone = round->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (zone->sh->syncer == ngx_pid) {
        zone->sh->syncer = 0;
    }

    ngx_http_throttle_metrics_synced(zone, !round->failed, round->took_all,
                                     round->sent_at);

    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_free(round);
}

/* A sync call's reply, or its failure (see ngx_http_throttle_redis_done_pt). */
static void
ngx_http_throttle_async_done(void *data, redisReply *reply, const char *err,
                             bool sent) noexcept
{
    ngx_http_throttle_async_call_t  *call;
    ngx_http_throttle_async_round_t *round;
    ngx_http_throttle_zone_t        *zone;
    int64_t                         *answer = NULL;
    ngx_uint_t                       failing;
    int64_t                          dropped = 0;

    call = (ngx_http_throttle_async_call_t *) data;
    round = call->round;
    zone = round->zone;

    if (reply) {
        err = ngx_http_throttle_async_read(zone, reply, call->n, &answer);

        /* an error reply has been counted by the transport */
        if (err && reply->type != REDIS_REPLY_ERROR) {
            ngx_http_throttle_redis_count_error(
                zone->redis->metrics, NGX_HTTP_THROTTLE_REDIS_ERR_REPLY);
        }
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    failing = zone->sh->failing;

    if (err == NULL) {
        ngx_http_throttle_async_apply(round, call->first, call->n, answer,
                                      zone->policy.now_us());
        dropped = zone->sh->dropped_units;
        zone->sh->failing = 0;
        zone->sh->dropped_units = 0;
        ngx_http_throttle_metrics_add(&zone->sh->metrics.sync_keys, call->n);

    } else {
        /* had Redis lost units counted as delivered, the nginx would
         * over-admit that much, once */
        ngx_http_throttle_async_keep(
            round, call->first, call->n,
            throttle::failed_sync(sent, reply != NULL));
        zone->sh->failing++;
        round->failed = 1;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_http_throttle_async_report(zone, err, failing, dropped);

    ngx_free(answer);
    ngx_free(call);

    if (--round->calls_in_flight == 0) {
        ngx_http_throttle_async_finish(round);
    }
}

/* A call of keys [first, first + n) of the round, in one allocation: their
 * names as KEYS (hash-tagged by the zone: one slot), and ARGV as the
 * algorithm lays it out. NULL if out of memory. */
static ngx_http_throttle_async_call_t *
ngx_http_throttle_async_call(ngx_http_throttle_async_round_t *round,
                             ngx_uint_t first, ngx_uint_t n) noexcept
{
    u_char                         *p;
    int64_t                        *argv;
    ngx_str_t                      *keys;
    ngx_uint_t                      i, nargv;
    ngx_http_throttle_async_key_t  *k;
    ngx_http_throttle_async_call_t *call;
    ngx_http_throttle_zone_t       *zone = round->zone;
    ngx_http_throttle_redis_t      *redis = zone->redis;
    const throttle::SyncLayout      layout = zone->policy.sync_layout();

    nargv = layout.head_args + n * layout.key_args;

    p = (u_char *) ngx_alloc(sizeof(ngx_http_throttle_async_call_t)
                                 + nargv * sizeof(int64_t)
                                 + n
                                     * (sizeof(ngx_str_t)
                                        + throttle::max_redis_key_len(
                                            redis->prefix.len, zone->name.len)),
                             ngx_cycle->log);
    if (p == NULL) {
        return NULL;
    }

    call = (ngx_http_throttle_async_call_t *) p;
    argv = (int64_t *) (call + 1);
    keys = (ngx_str_t *) (argv + nargv);
    p = (u_char *) (keys + n);

    zone->policy.sync_head_args(argv);

    for (i = 0; i < n; i++) {
        k = &round->keys[first + i];

        throttle::synced_plan(zone->policy, k->rate)
            .sync_key_args(k->units, round->sent_at,
                           argv + layout.head_args + i * layout.key_args);

        keys[i].data = p;
        keys[i].len = throttle::format_redis_key(
            (char *) p, ngx_http_throttle_sv(redis->prefix),
            ngx_http_throttle_sv(zone->name),
            throttle::ZoneKey::stored(k->data, k->len, k->hashed),
            throttle::HashTag::shard);
        p += keys[i].len;
    }

    call->round = round;
    call->first = first;
    call->n = n;
    call->eval.script = layout.script;
    call->eval.keys = keys;
    call->eval.nkeys = n;
    call->eval.argv = argv;
    call->eval.nargv = nargv;
    call->eval.timeout = (ngx_msec_t) throttle::sync_call_timeout_ms(
        zone->policy.sync_interval_us, (int64_t) redis->timeout,
        ngx_http_throttle_async_exiting());

    return call;
}

void
ngx_http_throttle_async_send(ngx_http_throttle_async_round_t *round,
                             ngx_uint_t first, ngx_uint_t n) noexcept
{
    ngx_http_throttle_zone_t       *zone = round->zone;
    ngx_http_throttle_async_call_t *call;

    call = ngx_http_throttle_async_call(round, first, n);

    if (call == NULL) {
        round->failed = 1;
        ngx_shmtx_lock(&zone->shpool->mutex);
        ngx_http_throttle_async_keep(round, first, n,
                                     throttle::FailedSync::units_kept);
        ngx_shmtx_unlock(&zone->shpool->mutex);
        return;
    }

    round->calls_in_flight++;

    if (ngx_http_throttle_redis_eval(zone->redis, &call->eval,
                                     ngx_http_throttle_async_done, call)
        == NULL)
    {
        /* backing off: as if Redis had failed */
        ngx_http_throttle_async_done(call, NULL, "Redis is unreachable", false);
    }
}
