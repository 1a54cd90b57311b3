/*
 * Async mode: the zone decides every request at once, as a local zone
 * does, and remembers per key the units it charged ("pending"). Every
 * sync_interval one worker of the nginx (whichever claims the zone first)
 * takes the keys touched since the last sync and sends them to Redis in
 * one pipelined batch of gcra_sync.lua calls; Redis adds them to the global
 * funnel and answers with its state, which replaces the zone's view of
 * each key. No request ever waits for Redis.
 *
 * When Redis cannot be reached the units stay pending in the zone (bounded
 * by the zone's size: a key evicted before it was synced loses them, and
 * they are counted) and go out with the next sync that succeeds.
 */

#include "ngx_http_throttle_module.h"

#include "throttle/clock.hpp"
#include "throttle/redis.hpp"
#include "throttle/window_sync.hpp"

#include <hiredis/hiredis.h>

/* Keys per script call (one slot, one Lua run), and per sync. */
#define NGX_HTTP_THROTTLE_ASYNC_BATCH 500
#define NGX_HTTP_THROTTLE_ASYNC_MAX 20000

typedef struct {
    u_char *data; /* the key as the zone stores it */
    u_short len;
    u_char  hashed;
    /* the node's pending units: see ngx_http_throttle_node_t */
    int64_t units;
    int64_t since;
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
        ngx_add_timer(zone->flush_timer, ngx_http_throttle_async_tick_ms(zone));
    }
}

static bool
ngx_http_throttle_async_gcra(const ngx_http_throttle_zone_t *zone) noexcept
{
    return zone->policy.algorithm == throttle::Algorithm::gcra;
}

/* The shape of a sync script's call and answer: GCRA sends T and the
 * grace, then a key's units and their age, and gets a time to live per
 * key; the window counters send the window, then a key's units of its
 * window, of the one before and the window's age, and get how far Redis
 * is into its window followed by the counts per key. */
static ngx_uint_t
ngx_http_throttle_async_reply_head(
    const ngx_http_throttle_zone_t *zone) noexcept
{
    return ngx_http_throttle_async_gcra(zone) ? 0 : 1;
}

static ngx_uint_t
ngx_http_throttle_async_reply_per_key(
    const ngx_http_throttle_zone_t *zone) noexcept
{
    return zone->policy.algorithm == throttle::Algorithm::sliding_window ? 2
                                                                         : 1;
}

/* Under the zone's lock: Redis's answer replaces the view of each key, plus
 * what this node charged since the batch left. */
static void
ngx_http_throttle_async_apply(ngx_http_throttle_async_flush_t *flush,
                              ngx_uint_t first, ngx_uint_t n,
                              const int64_t *answer, int64_t now) noexcept
{
    ngx_uint_t                     i, j, per_key;
    bool                           fresh;
    const int64_t                 *values;
    ngx_http_throttle_node_t      *tn;
    ngx_http_throttle_async_key_t *k;
    ngx_http_throttle_zone_t      *zone = flush->zone;
    const throttle::Policy        &policy = zone->policy;

    per_key = ngx_http_throttle_async_reply_per_key(zone);

    for (i = 0; i < n; i++) {
        values =
            answer + ngx_http_throttle_async_reply_head(zone) + i * per_key;

        /* fresh everywhere: the node's own view, which holds at least its
         * own units, has nothing to learn (most keys of a crawl) */
        fresh = true;
        for (j = 0; j < per_key; j++) {
            fresh = fresh && values[j] == 0;
        }

        if (fresh) {
            continue;
        }

        k = &flush->keys[first + i];
        tn = ngx_http_throttle_find_node(zone, k->data, k->len, k->hashed);

        if (tn == NULL) {
            continue; /* evicted meanwhile; Redis has its units */
        }

        if (ngx_http_throttle_async_gcra(zone)) {
            tn->state.words[0] = throttle::synced_tat(
                flush->sent_at, values[0], policy.gcra.emission_interval_us,
                tn->pending);
            tn->expire_at = tn->state.words[0];
            continue;
        }

        (void) throttle::synced_window_state(
            policy.algorithm, policy.window.window_us, flush->sent_at,
            answer[0], values, {tn->pending, tn->pending_since}, now, tn->state,
            tn->expire_at);
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
    throttle::PendingUnits         merged;

    for (i = 0; i < n; i++) {
        k = &flush->keys[first + i];
        tn = ngx_http_throttle_find_node(zone, k->data, k->len, k->hashed);

        if (tn == NULL) {
            zone->sh->dropped_units +=
                units ? throttle::pending_total(zone->policy, k->units) : 0;
            continue;
        }

        if (!units) {
            ngx_http_throttle_mark_dirty(zone, tn); /* to read the state */
            continue;
        }

        merged = throttle::merge_pending(zone->policy, {k->units, k->since},
                                         {tn->pending, tn->pending_since});
        tn->pending = merged.units;
        tn->pending_since = merged.since;

        if (k->units || tn->sync_rounds) {
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
    int64_t                         *ttls;
    size_t                           size;
    ngx_uint_t                       failing;
    int64_t                          dropped;

    call = (ngx_http_throttle_async_call_t *) data;
    flush = call->flush;
    zone = flush->zone;

    ttls = NULL;

    if (reply) {
        size = ngx_http_throttle_async_reply_head(zone)
            + call->n * ngx_http_throttle_async_reply_per_key(zone);
        ttls = (int64_t *) ngx_alloc(size * sizeof(int64_t), ngx_cycle->log);
        if (ttls == NULL) {
            err = "out of memory";

        } else {
            err = throttle::decode_sync_reply(reply, size, ttls);
        }
    }

    ngx_shmtx_lock(&zone->shpool->mutex);

    if (err == NULL) {
        ngx_http_throttle_async_apply(flush, call->first, call->n, ttls,
                                      ngx_http_throttle_now(zone));
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

    ngx_free(ttls);
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

        if (tn->sync_rounds == 1 && tn->pending == 0 && tn->expire_at <= now) {
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
        k->units = tn->pending;
        k->since = tn->pending_since;
        p = ngx_cpymem(p, tn->data, tn->len);

        tn->pending = 0;
        ngx_queue_remove(q);

        if (--tn->sync_rounds) {
            ngx_queue_insert_tail(&zone->sh->dirty, q);
        }
    }

    return flush;
}

static u_char *
ngx_http_throttle_async_arg(u_char *p, ngx_str_t *arg, int64_t value) noexcept
{
    arg->data = p;
    p = ngx_sprintf(p, "%L", value);
    arg->len = p - arg->data;
    return p;
}

static throttle::ScriptId
ngx_http_throttle_async_script(const ngx_http_throttle_zone_t *zone) noexcept
{
    switch (zone->policy.algorithm) {
    case throttle::Algorithm::fixed_window:
        return throttle::ScriptId::fixed_window_sync;
    case throttle::Algorithm::sliding_window:
        return throttle::ScriptId::sliding_window_sync;
    default:
        return throttle::ScriptId::gcra_sync;
    }
}

/* Sends keys [first, first + n) of the flush as one script call. */
static void
ngx_http_throttle_async_send(ngx_http_throttle_async_flush_t *flush,
                             ngx_uint_t first, ngx_uint_t n) noexcept
{
    size_t                          keys_len;
    u_char                         *p;
    ngx_str_t                      *args;
    ngx_uint_t                      i;
    ngx_http_throttle_async_key_t  *k;
    ngx_http_throttle_async_call_t *call;
    ngx_http_throttle_zone_t       *zone = flush->zone;
    ngx_http_throttle_redis_t      *redis = zone->redis;
    int64_t                         grace, age;
    ngx_uint_t                      nargs;
    const throttle::Policy         &policy = zone->policy;

    keys_len = throttle::max_redis_key_len(redis->prefix.len, zone->name.len);

    /* KEYS, then at most 2 words ahead and 3 per key */
    p = (u_char *) ngx_alloc(
        sizeof(ngx_http_throttle_async_call_t) + (4 * n + 2) * sizeof(ngx_str_t)
            + n * (keys_len + 3 * NGX_INT64_LEN) + 2 * NGX_INT64_LEN,
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

    /* KEYS: the zone's keys */
    args = (ngx_str_t *) (call + 1);
    p = (u_char *) (args + 4 * n + 2);

    for (i = 0; i < n; i++) {
        k = &flush->keys[first + i];
        throttle::ZoneKey key =
            throttle::ZoneKey::stored(k->data, k->len, k->hashed);
        args[i].data = p;
        args[i].len = throttle::format_redis_key(
            (char *) p, {(const char *) redis->prefix.data, redis->prefix.len},
            {(const char *) zone->name.data, zone->name.len}, key,
            throttle::HashTag::zone);
        p += args[i].len;
    }

    nargs = n;

    if (ngx_http_throttle_async_gcra(zone)) {
        /* ARGV: T, the grace, then per key its units and how long ago the
         * first of them was charged. Ages are capped at the grace: units
         * kept through an outage are placed no further back than that. */
        grace = 2 * (int64_t) zone->sync_interval * 1000;

        p = ngx_http_throttle_async_arg(p, &args[nargs++],
                                        policy.gcra.emission_interval_us);
        p = ngx_http_throttle_async_arg(p, &args[nargs++], grace);

        for (i = 0; i < n; i++) {
            k = &flush->keys[first + i];
            age = k->units
                ? ngx_min(ngx_max(flush->sent_at - k->since, 0), grace)
                : 0;

            p = ngx_http_throttle_async_arg(p, &args[nargs++], k->units);
            p = ngx_http_throttle_async_arg(p, &args[nargs++], age);
        }

    } else {
        /* ARGV: the window, then per key its units of the node's window,
         * of the one before, and how long ago that window began */
        p = ngx_http_throttle_async_arg(p, &args[nargs++],
                                        policy.window.window_us);

        for (i = 0; i < n; i++) {
            k = &flush->keys[first + i];
            age = k->units ? ngx_max(flush->sent_at - k->since, 0) : 0;

            p = ngx_http_throttle_async_arg(
                p, &args[nargs++], throttle::window_units_cur(k->units));
            p = ngx_http_throttle_async_arg(
                p, &args[nargs++], throttle::window_units_prev(k->units));
            p = ngx_http_throttle_async_arg(p, &args[nargs++], age);
        }
    }

    flush->pending++;

    if (ngx_http_throttle_redis_eval(
            redis, ngx_http_throttle_async_script(zone), args, n, nargs,
            ngx_max(redis->timeout, zone->sync_interval),
            ngx_http_throttle_async_done, call)
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
    now = ngx_http_throttle_now(zone);
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

    zone->flush_timer = ev;

    /* workers tick out of step; whichever finds the sync due claims it */
    ngx_add_timer(
        ev,
        1 + (ngx_msec_t) ngx_random() % ngx_http_throttle_async_tick_ms(zone));

    return NGX_OK;
}
