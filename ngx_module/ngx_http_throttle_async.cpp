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
 * When Redis cannot be reached the units stay pending in the zone (bounded
 * by the zone's size: a key evicted before it was synced loses them, and
 * they are counted) and go out with the next sync that succeeds.
 */

#include "ngx_http_throttle_module.h"

#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>

/* Keys per script call (one slot, one Lua run), and per sync. */
#define NGX_HTTP_THROTTLE_ASYNC_BATCH 500
#define NGX_HTTP_THROTTLE_ASYNC_MAX 20000

typedef struct {
    u_char                *data; /* the key as the zone stores it */
    u_short                len;
    u_char                 hashed;
    throttle::PendingUnits units; /* taken from the node */
} ngx_http_throttle_async_key_t;

typedef struct {
    ngx_http_throttle_zone_t      *zone;
    int64_t                        sent_at; /* this machine's clock, us */
    ngx_uint_t                     nkeys;
    ngx_uint_t                     pending; /* script calls in flight */
    ngx_http_throttle_async_key_t *keys;
} ngx_http_throttle_async_flush_t;

typedef struct {
    ngx_http_throttle_async_flush_t *flush;
    ngx_uint_t                       first;
    ngx_uint_t                       n;
} ngx_http_throttle_async_call_t;

static void ngx_http_throttle_async_tick(ngx_event_t *ev) noexcept;

/* Workers look four times an interval whether the sync is due, so that it
 * runs at most a quarter interval late whichever worker takes it. */
static ngx_msec_t
ngx_http_throttle_async_tick_ms(ngx_http_throttle_zone_t *zone) noexcept
{
    return ngx_max(zone->sync_interval / 4, (ngx_msec_t) 2);
}

static void
ngx_http_throttle_async_schedule(ngx_http_throttle_zone_t *zone) noexcept
{
    if (!ngx_exiting && !ngx_terminate && !ngx_quit) {
        ngx_add_timer(zone->sync_timer, ngx_http_throttle_async_tick_ms(zone));
    }
}

/* Under the zone's lock: Redis's answer replaces the view of each key, plus
 * what this node charged since the batch left. */
static void
ngx_http_throttle_async_apply(ngx_http_throttle_async_flush_t *flush,
                              ngx_uint_t first, ngx_uint_t n,
                              const int64_t *answer, int64_t now) noexcept
{
    ngx_uint_t                     i;
    ngx_http_throttle_node_t      *tn;
    ngx_http_throttle_async_key_t *k;
    ngx_http_throttle_zone_t      *zone = flush->zone;
    const throttle::SyncLayout     layout = zone->policy.sync_layout();

    for (i = 0; i < n; i++) {
        k = &flush->keys[first + i];
        tn = ngx_http_throttle_find_node(zone, k->data, k->len, k->hashed);

        if (tn == NULL) {
            continue; /* evicted meanwhile; Redis has its units */
        }

        (void) zone->policy.apply_sync(
            answer, answer + layout.reply_head + i * layout.reply_per_key,
            flush->sent_at, now, tn->stored);
    }
}

/* Under the zone's lock: the keys are due a sync again, with their units
 * unless these may have reached Redis; units whose key is gone are counted
 * as dropped. */
static void
ngx_http_throttle_async_keep(ngx_http_throttle_async_flush_t *flush,
                             ngx_uint_t first, ngx_uint_t n,
                             bool units) noexcept
{
    ngx_uint_t                     i;
    ngx_http_throttle_node_t      *tn;
    ngx_http_throttle_async_key_t *k;
    ngx_http_throttle_zone_t      *zone = flush->zone;

    for (i = 0; i < n; i++) {
        k = &flush->keys[first + i];
        tn = ngx_http_throttle_find_node(zone, k->data, k->len, k->hashed);

        if (tn == NULL) {
            zone->sh->dropped_units +=
                units ? zone->policy.pending_total(k->units) : 0;
            continue;
        }

        if (!units) {
            ngx_http_throttle_mark_dirty(zone, tn); /* to read the state */
            continue;
        }

        tn->stored.pending =
            zone->policy.merge_pending(k->units, tn->stored.pending);

        if (k->units.units || tn->sync_rounds) {
            ngx_http_throttle_mark_dirty(zone, tn);
        }
    }
}

static void
ngx_http_throttle_async_finish(ngx_http_throttle_async_flush_t *flush) noexcept
{
    ngx_http_throttle_zone_t *zone = flush->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (zone->sh->flusher == ngx_pid) {
        zone->sh->flusher = 0;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    ngx_free(flush);
}

static void
ngx_http_throttle_async_done(void *data, redisReply *reply, const char *err,
                             bool sent) noexcept
{
    ngx_http_throttle_async_call_t  *call;
    ngx_http_throttle_async_flush_t *flush;
    ngx_http_throttle_zone_t        *zone;
    int64_t                         *answer;
    size_t                           size;
    ngx_uint_t                       failing;
    int64_t                          dropped;

    call = (ngx_http_throttle_async_call_t *) data;
    flush = call->flush;
    zone = flush->zone;

    answer = NULL;

    if (reply) {
        throttle::SyncLayout layout = zone->policy.sync_layout();

        size = layout.reply_head + call->n * layout.reply_per_key;
        answer = (int64_t *) ngx_alloc(size * sizeof(int64_t), ngx_cycle->log);
        if (answer == NULL) {
            err = "out of memory";

        } else {
            err = throttle::decode_sync_reply(reply, size, answer);
        }
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (err == NULL) {
        ngx_http_throttle_async_apply(flush, call->first, call->n, answer,
                                      zone->policy.now_us());
        failing = zone->sh->failing;
        dropped = zone->sh->dropped_units;
        zone->sh->failing = 0;
        zone->sh->dropped_units = 0;

    } else {
        /* A sync that reached Redis but got no answer (a stalled Redis)
         * may still run: sending its units again would charge them twice
         * and lock the keys out. They count as delivered; had Redis lost
         * them instead, the nodes would over-admit that much, once. */
        ngx_http_throttle_async_keep(flush, call->first, call->n,
                                     !sent || reply);

        failing = zone->sh->failing++;
        dropped = 0;
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    /* an outage is told when it starts and when it ends, not per sync */
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

    ngx_free(answer);
    ngx_free(call);

    if (--flush->pending == 0) {
        ngx_http_throttle_async_finish(flush);
    }
}

/* Under the zone's lock: takes the keys due a sync, oldest first. */
static ngx_http_throttle_async_flush_t *
ngx_http_throttle_async_take(ngx_http_throttle_zone_t *zone,
                             int64_t                   now) noexcept
{
    size_t                           size;
    u_char                          *p;
    ngx_uint_t                       n;
    ngx_queue_t                     *q, *next;
    ngx_http_throttle_node_t        *tn;
    ngx_http_throttle_async_flush_t *flush;
    ngx_http_throttle_async_key_t   *k;

    n = 0;
    size = sizeof(ngx_http_throttle_async_flush_t);

    for (q = ngx_queue_head(&zone->sh->dirty);
         q != ngx_queue_sentinel(&zone->sh->dirty)
         && n < NGX_HTTP_THROTTLE_ASYNC_MAX;
         q = next)
    {
        next = ngx_queue_next(q);
        tn = ngx_queue_data(q, ngx_http_throttle_node_t, dirty);

        if (tn->sync_rounds == 1 && tn->stored.pending.units == 0
            && tn->stored.expire_at_us <= now)
        {
            /* The second sync only reads what the other nodes charged, and
             * this key's funnel has drained here: should they have filled
             * it, this node learns it at the sync after its next use, which
             * is within the stated bound. Many keys used once each (a
             * crawl) would otherwise cost Redis a second read each. */
            ngx_queue_remove(q);
            tn->sync_rounds = 0;
            continue;
        }

        size += sizeof(ngx_http_throttle_async_key_t) + tn->len;
        n++;
    }

    if (n == 0) {
        return NULL;
    }

    p = (u_char *) ngx_alloc(size, ngx_cycle->log);
    if (p == NULL) {
        return NULL;
    }

    flush = (ngx_http_throttle_async_flush_t *) p;
    flush->zone = zone;
    flush->nkeys = n;
    flush->pending = 0;
    flush->keys = (ngx_http_throttle_async_key_t *) (flush + 1);
    p = (u_char *) (flush->keys + n);

    for (k = flush->keys; k < flush->keys + n; k++) {
        q = ngx_queue_head(&zone->sh->dirty);
        tn = ngx_queue_data(q, ngx_http_throttle_node_t, dirty);

        k->data = p;
        k->len = tn->len;
        k->hashed = tn->hashed;
        k->units = tn->stored.pending;
        p = ngx_cpymem(p, tn->data, tn->len);

        tn->stored.pending.units = 0;
        ngx_queue_remove(q);

        if (--tn->sync_rounds) {
            ngx_queue_insert_tail(&zone->sh->dirty, q);
        }
    }

    return flush;
}

/* Sends keys [first, first + n) of the flush as one script call: their
 * names as KEYS, and ARGV as the algorithm lays it out. */
static void
ngx_http_throttle_async_send(ngx_http_throttle_async_flush_t *flush,
                             ngx_uint_t first, ngx_uint_t n) noexcept
{
    size_t                          keys_len;
    u_char                         *p;
    int64_t                        *argv;
    ngx_str_t                      *keys;
    ngx_uint_t                      i;
    ngx_http_throttle_async_key_t  *k;
    ngx_http_throttle_async_call_t *call;
    ngx_http_throttle_redis_call_t  eval;
    ngx_http_throttle_zone_t       *zone = flush->zone;
    ngx_http_throttle_redis_t      *redis = zone->redis;
    const throttle::SyncLayout      layout = zone->policy.sync_layout();

    keys_len = throttle::max_redis_key_len(redis->prefix.len, zone->name.len);

    p = (u_char *) ngx_alloc(sizeof(ngx_http_throttle_async_call_t)
                                 + (layout.head_args + n * layout.key_args)
                                     * sizeof(int64_t)
                                 + n * (sizeof(ngx_str_t) + keys_len),
                             ngx_cycle->log);

    call = (ngx_http_throttle_async_call_t *) p;

    if (call == NULL) {
        ngx_shmtx_lock(&zone->shpool->mutex);
        ngx_http_throttle_async_keep(flush, first, n, true);
        ngx_shmtx_unlock(&zone->shpool->mutex);
        return;
    }

    call->flush = flush;
    call->first = first;
    call->n = n;

    argv = (int64_t *) (call + 1);
    keys = (ngx_str_t *) (argv + layout.head_args + n * layout.key_args);
    p = (u_char *) (keys + n);

    zone->policy.sync_head_args(argv);

    for (i = 0; i < n; i++) {
        k = &flush->keys[first + i];

        zone->policy.sync_key_args(k->units, flush->sent_at,
                                   argv + layout.head_args
                                       + i * layout.key_args);

        keys[i].data = p;
        keys[i].len = throttle::format_redis_key(
            (char *) p, ngx_http_throttle_sv(redis->prefix),
            ngx_http_throttle_sv(zone->name),
            throttle::ZoneKey::stored(k->data, k->len, k->hashed),
            throttle::HashTag::zone);
        p += keys[i].len;
    }

    eval.script = layout.script;
    eval.keys = keys;
    eval.nkeys = n;
    eval.argv = argv;
    eval.nargv = layout.head_args + n * layout.key_args;
    eval.timeout = ngx_max(redis->timeout, zone->sync_interval);

    flush->pending++;

    if (ngx_http_throttle_redis_eval(redis, &eval, ngx_http_throttle_async_done,
                                     call)
        == NULL)
    {
        /* backing off: as if Redis had failed */
        ngx_http_throttle_async_done(call, NULL, "Redis is unreachable", false);
    }
}

static void
ngx_http_throttle_async_tick(ngx_event_t *ev) noexcept
{
    ngx_uint_t                       first, n;
    ngx_http_throttle_zone_t        *zone;
    ngx_http_throttle_async_flush_t *flush;
    int64_t                          now, interval;

    zone = (ngx_http_throttle_zone_t *) ev->data;
    now = zone->policy.now_us();
    flush = NULL;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* drained keys go even without traffic to sweep them */
    ngx_http_throttle_expire(zone, 100, now);

    /* due within a millisecond: timers fire on whole, cached milliseconds */
    if (now + 1000 >= zone->sh->flush_at
        && (zone->sh->flusher == 0 || now >= zone->sh->flusher_until)
        && !ngx_http_throttle_redis_backing_off(zone->redis))
    {
        /* (a worker whose own connections are backing off leaves the sync
         * to another one, or to its next tick) */
        /* this worker syncs this round; the claim lapses if it dies. The
         * next round keeps the cadence unless it has fallen behind. */
        interval = (int64_t) zone->sync_interval * 1000;
        zone->sh->flush_at = zone->sh->flush_at + interval > now
            ? zone->sh->flush_at + interval
            : now + interval;
        flush = ngx_http_throttle_async_take(zone, now);

        if (flush) {
            zone->sh->flusher = ngx_pid;
            zone->sh->flusher_until = now
                + (int64_t) (zone->sync_interval
                             + ngx_max(zone->redis->timeout,
                                       zone->sync_interval))
                    * 1000;
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (flush) {
        flush->sent_at = now;
        flush->pending = 1; /* until every call is out */

        for (first = 0; first < flush->nkeys; first += n) {
            n = ngx_min(flush->nkeys - first,
                        (ngx_uint_t) NGX_HTTP_THROTTLE_ASYNC_BATCH);
            ngx_http_throttle_async_send(flush, first, n);
        }

        if (--flush->pending == 0) {
            ngx_http_throttle_async_finish(flush);
        }
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
    /* a pending sync does not keep an exiting worker alive */
    ev->cancelable = 1;

    zone->sync_timer = ev;

    /* workers tick out of step; whichever finds the sync due claims it */
    ngx_add_timer(
        ev,
        1 + (ngx_msec_t) ngx_random() % ngx_http_throttle_async_tick_ms(zone));

    return NGX_OK;
}
