/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One script in flight per strict key and nginx (docs/modes.md, "A
 * flooded key"): a request that asks Redis takes its keys' flights under
 * the zones' locks, and lands them once the answer is remembered (or has
 * failed, or the request is gone); a request the decision holds in its
 * flight stage (throttle::Policy::flight_wait_us()) waits on a timer of
 * its own, and its resume handler decides it again every millisecond, or
 * at once when a flight of its key lands in its worker.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_request.h"

#include "throttle/clock.hpp"

/* This worker's requests waiting for the flight of the check's key look
 * again at once, rather than at their next timer: the others' look when
 * their timers fire. */
static void
ngx_http_throttle_flight_wake(const ngx_http_throttle_check_t *check) noexcept
{
    ngx_queue_t                      *q;
    ngx_event_t                      *ev;
    const ngx_http_throttle_check_t  *w;
    const ngx_http_throttle_lookup_t *key = &check->lookup;
    ngx_queue_t                      *waiters = &key->zone->flight_waiters;

    for (q = ngx_queue_head(waiters); q != ngx_queue_sentinel(waiters);
         q = ngx_queue_next(q))
    {
        w = ngx_queue_data(q, ngx_http_throttle_check_t, flight_link);
        ev = w->ctx->flight_timer;

        if (ev == NULL || ev->posted || w->lookup.tag != key->tag
            || w->lookup.key.hashed() != key->key.hashed()
            || w->lookup.key.size() != key->key.size()
            || ngx_memcmp(w->lookup.key.data(), key->key.data(),
                          key->key.size())
                != 0)
        {
            continue;
        }

        if (ev->timer_set) {
            ngx_del_timer(ev);
        }

        ngx_post_event(ev, &ngx_posted_events);
    }
}

/* The key's flight the check took is over; `failed`: Redis gave no answer
 * in time, or an error (the requests that waited for it fail too). */
void
ngx_http_throttle_flight_land(ngx_http_throttle_check_t *check,
                              bool                       failed) noexcept
{
    if (check->flight) {
        ngx_http_throttle_land_flight(&check->lookup, check->flight, failed);
        check->flight = 0;
        ngx_http_throttle_flight_wake(check);
    }
}

/* The request's checks wait for no flight any more. */
static void
ngx_http_throttle_flight_unqueue(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->checks[i].flight_link.next) {
            ngx_queue_remove(&ctx->checks[i].flight_link);
            ctx->checks[i].flight_link.next = NULL;
        }
    }
}

/* Under the zones' locks: each key the request asks Redis about has its
 * script as flight until it times out. */
void
ngx_http_throttle_flight_take(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->locked && ctx->decision.asks_redis(i)) {
            check->flight = check->lookup.now
                + (int64_t) check->lookup.zone->redis->timeout * 1000;
            ngx_http_throttle_take_flight(&check->lookup, check->flight);
        }
    }
}

/* The look again at the flights a request waits for. */
static void
ngx_http_throttle_flight_poll(ngx_event_t *ev) noexcept
{
    ngx_http_throttle_ctx_t *ctx = (ngx_http_throttle_ctx_t *) ev->data;

    ngx_http_throttle_flight_unqueue(ctx);
    ctx->resume_handler(ctx);
}

static void
ngx_http_throttle_flight_cleanup(void *data) noexcept
{
    ngx_event_t *ev = (ngx_event_t *) data;

    if (ev->timer_set) {
        ngx_del_timer(ev);
    }

    if (ev->posted) {
        ngx_delete_posted_event(ev);
    }

    ngx_http_throttle_flight_unqueue((ngx_http_throttle_ctx_t *) ev->data);
}

/* A request waits for its keys' flights, for the first time: each zone
 * whose key has one counts it. */
static void
ngx_http_throttle_flight_count(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->decision.check(i).flight_wait_us > 0) {
            ngx_http_throttle_metrics_add(
                &ctx->checks[i].lookup.zone->sh->metrics.flight_waits, 1);
        }
    }
}

/* A strict key of the request has another request's script in flight:
 * the request looks again shortly (the decision's flight_poll_us()), and
 * its resume handler decides it then. NGX_AGAIN, or an error. */
ngx_int_t
ngx_http_throttle_flight_wait(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_event_t               *ev = ctx->flight_timer;
    ngx_pool_cleanup_t        *cln;
    ngx_http_request_t        *r = ctx->request;
    ngx_http_throttle_check_t *check;

    if (ev == NULL) {
        ev = (ngx_event_t *) ngx_pcalloc(r->pool, sizeof(ngx_event_t));
        cln = ngx_pool_cleanup_add(r->pool, 0);
        if (ev == NULL || cln == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ev->handler = ngx_http_throttle_flight_poll;
        ev->data = ctx;
        ev->log = r->connection->log;
        cln->handler = ngx_http_throttle_flight_cleanup;
        cln->data = ev;

        ctx->flight_timer = ev;
        ctx->flight_since_us = throttle::monotonic_now_us();
        ngx_http_throttle_flight_count(ctx);
    }

    ngx_add_timer(
        ev, (ngx_msec_t) throttle::ceil_millis(ctx->decision.flight_poll_us()));

    /* woken at once when a flight of this worker's lands */
    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (ctx->decision.check(i).flight_wait_us > 0
            && check->flight_link.next == NULL)
        {
            ngx_queue_insert_tail(&check->lookup.zone->flight_waiters,
                                  &check->flight_link);
        }
    }

    ctx->state = NGX_HTTP_THROTTLE_WAITING;
    return NGX_AGAIN;
}
