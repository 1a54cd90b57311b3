/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * concurrent=: the places a worker's requests hold. A request a
 * concurrent= zone admitted holds its place until it ends: the log phase
 * frees it (ngx_http_throttle_free_places(), before settle=), or, for a
 * request freed without one, its pool's cleanup. Meanwhile the worker
 * renews its places in one pass every quarter of the shortest lease: a
 * local zone moves a place to now's quarter (throttle::Policy::renew()),
 * a strict one has Redis push its lease's end, one script per place,
 * pipelined. A worker that dies renews nothing: its places end within a
 * lease of their last renewal.
 */

#include "ngx_http_throttle_request.h"

#include <hiredis/hiredis.h>

struct ngx_http_throttle_place_s {
    ngx_queue_t                queue; /* in the worker's places */
    ngx_http_throttle_check_t *check; /* in the request's pool */
    ngx_http_throttle_zone_t  *zone;
    /* local: when it was taken or last renewed, of the zone's clock; -1
     * once its lease has ended */
    int64_t    held_at;
    ngx_msec_t renewed; /* ngx_current_msec */
    unsigned   freed : 1;
};

static void
ngx_http_throttle_count_in_flight(ngx_http_throttle_zone_t *zone,
                                  ngx_atomic_int_t          add) noexcept
{
    (void) ngx_atomic_fetch_add(&zone->sh->in_flight[ngx_process_slot], add);
}

/* The request has ended (or another zone's refusal, or its pool, ends
 * it): its place is given back, as a settle of 1 unit reserved and none
 * used. */
static void
ngx_http_throttle_free_place(ngx_http_throttle_place_t *place, ngx_pool_t *pool,
                             ngx_log_t *log) noexcept
{
    ngx_http_throttle_check_t *check = place->check;

    if (place->freed) {
        return;
    }

    place->freed = 1;
    ngx_queue_remove(&place->queue);
    ngx_http_throttle_count_in_flight(place->zone, -1);

    if (ngx_http_throttle_strict(place->zone)) {
        /* the transport logs a release Redis did not take: the place then
         * ends with its lease */
        (void) ngx_http_throttle_strict_settle_send(pool, check, -1, NULL,
                                                    NULL);

    } else if (place->held_at >= 0) {
        (void) ngx_http_throttle_settle_key(&check->lookup, 1, 0,
                                            place->held_at, log);
    }
}

/* A request freed before its log phase (none runs for it). */
static void
ngx_http_throttle_place_cleanup(void *data) noexcept
{
    ngx_http_throttle_place_t *place = (ngx_http_throttle_place_t *) data;

    ngx_http_throttle_free_place(place, place->check->ctx->request->pool,
                                 ngx_cycle->log);
}

/* A phase has decided: each concurrent= zone that kept the request's
 * charge holds a place for it, in the worker's list, whose renewal timer
 * runs while the list is not empty. */
ngx_int_t
ngx_http_throttle_hold_places(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                     i;
    ngx_pool_cleanup_t            *cln;
    ngx_http_throttle_place_t     *place;
    ngx_http_throttle_check_t     *check;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_get_module_main_conf(
        ctx->request, ngx_http_throttle_module);

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->lookup.zone == NULL
            || !check->lookup.zone->policy.holds_places()
            || !ctx->decision.check(i).charged)
        {
            continue;
        }

        cln = ngx_pool_cleanup_add(ctx->request->pool,
                                   sizeof(ngx_http_throttle_place_t));
        if (cln == NULL) {
            return NGX_ERROR;
        }

        place = (ngx_http_throttle_place_t *) cln->data;
        place->check = check;
        place->zone = check->lookup.zone;
        place->held_at = check->lookup.now;
        place->renewed = ngx_current_msec;
        place->freed = 0;
        ngx_queue_insert_tail(&tmcf->places, &place->queue);
        ngx_http_throttle_count_in_flight(place->zone, 1);

        check->place = place;
        cln->handler = ngx_http_throttle_place_cleanup;

        if (!tmcf->renew_timer.timer_set) {
            ngx_add_timer(&tmcf->renew_timer, tmcf->renew_interval);
        }
    }

    return NGX_OK;
}

void
ngx_http_throttle_free_places(ngx_http_throttle_request_ctx_t *rctx) noexcept
{
    ngx_uint_t                 p, i;
    ngx_http_throttle_ctx_t   *ctx;
    ngx_http_throttle_place_t *place;

    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        ctx = &rctx->phases[p];

        for (i = 0; i < ctx->nchecks; i++) {
            place = ctx->checks[i].place;
            if (place) {
                ngx_http_throttle_free_place(place, ctx->request->pool,
                                             ctx->request->connection->log);
            }
        }
    }
}

/* A renewal came after the place's lease had ended: the place is not
 * given back (it may be another request's), and the request goes on
 * without one. */
static void
ngx_http_throttle_place_lost(ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "throttle zone \"%V\": a request in flight lost its place, "
                  "whose lease had ended before its renewal",
                  &zone->name);
}

/* A strict renewal's answer, whenever it comes: 1 renewed, 0 lost. The
 * zone outlives it. */
static void
ngx_http_throttle_place_renewed(void *data, redisReply *reply, const char *,
                                bool) noexcept
{
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
        ngx_http_throttle_place_lost((ngx_http_throttle_zone_t *) data);
    }
}

/* One place's renewal, if its zone's interval has passed since the last
 * (less half the timer's: a place is renewed on the tick nearest). */
static void
ngx_http_throttle_renew_place(ngx_http_throttle_place_t *place,
                              ngx_msec_t                 tick) noexcept
{
    ngx_http_throttle_zone_t *zone = place->zone;

    if (ngx_current_msec - place->renewed + tick / 2 < zone->renew_interval
        || place->held_at < 0)
    {
        return;
    }

    place->renewed = ngx_current_msec;

    if (ngx_http_throttle_strict(zone)) {
        (void) ngx_http_throttle_strict_renew(
            place->check, ngx_http_throttle_place_renewed, zone);
        return;
    }

    place->held_at =
        ngx_http_throttle_renew_key(&place->check->lookup, place->held_at);

    if (place->held_at < 0) {
        ngx_http_throttle_place_lost(zone);
    }
}

static void
ngx_http_throttle_renew_handler(ngx_event_t *ev) noexcept
{
    ngx_queue_t                   *q;
    ngx_http_throttle_main_conf_t *tmcf =
        (ngx_http_throttle_main_conf_t *) ev->data;

    for (q = ngx_queue_head(&tmcf->places);
         q != ngx_queue_sentinel(&tmcf->places); q = ngx_queue_next(q))
    {
        ngx_http_throttle_renew_place(
            ngx_queue_data(q, ngx_http_throttle_place_t, queue),
            tmcf->renew_interval);
    }

    if (!ngx_queue_empty(&tmcf->places)) {
        ngx_add_timer(ev, tmcf->renew_interval);
    }
}

/* A worker's list of places, and the timer that renews them every quarter
 * of the shortest lease; its counts of requests in flight start at none
 * (a worker respawned after a crash takes the dead one's slot). */
void
ngx_http_throttle_places_init_worker(
    ngx_cycle_t *cycle, ngx_http_throttle_main_conf_t *tmcf) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_zone_t **zones =
        (ngx_http_throttle_zone_t **) tmcf->zones.elts;

    ngx_queue_init(&tmcf->places);
    tmcf->renew_interval = 0;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (zones[i]->policy.holds_places()) {
            zones[i]->sh->in_flight[ngx_process_slot] = 0;

            if (tmcf->renew_interval == 0
                || zones[i]->renew_interval < tmcf->renew_interval)
            {
                tmcf->renew_interval = zones[i]->renew_interval;
            }
        }
    }

    tmcf->renew_timer.handler = ngx_http_throttle_renew_handler;
    tmcf->renew_timer.data = tmcf;
    tmcf->renew_timer.log = cycle->log;
    /* it keeps no worker from exiting: the requests it renews do */
    tmcf->renew_timer.cancelable = 1;
}
