/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * settle=: when a main request ends (nginx's log phase: after the
 * response, whatever its status, a client that went away included), each
 * "throttle" line with settle= evaluates it, and its zone's key is charged
 * what the request used beyond its cost=, or given the difference back.
 * Which checks settle, and by how much, is the core's rule
 * (throttle::RequestDecision::settle_units()); applying it is the zone's
 * (ngx_http_throttle_settle_key()). The handler runs before access_log's,
 * so that $throttle_settled is known there. It frees the places that
 * concurrent= zones gave the request first.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_request.h"

#include "throttle/parse.hpp"

/* A line's settle= value, or -1 (logged once a second per zone and worker,
 * counted) if it is not a count of units. */
static int64_t
ngx_http_throttle_settle_value(ngx_http_request_t        *r,
                               ngx_http_throttle_check_t *check) noexcept
{
    ngx_str_t                 value;
    ngx_http_throttle_zone_t *zone = check->lookup.zone;
    const char               *why = "is not a count of units";

    if (ngx_http_throttle_value(r, check->settle, &value) == NGX_OK) {
        auto parsed = throttle::parse_count(
            {(const char *) value.data, value.len}, throttle::kMaxCost);

        if (parsed) {
            return *parsed.value;
        }

        why = value.len ? parsed.error : "is empty";

    } else {
        ngx_str_set(&value, "");
    }

    ngx_http_throttle_metrics_settled(zone, NGX_HTTP_THROTTLE_SETTLE_INVALID);

    if (ngx_http_throttle_log_due(&zone->settle_log, ngx_current_msec, 1000)) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "throttle: settle value \"%V\" for zone \"%V\" %s; "
                      "the request keeps the cost it was charged%s",
                      &value, &zone->name, why,
                      zone->settle_log.suppressed
                          ? " (and earlier ones, not logged)"
                          : "");
        zone->settle_log.suppressed = 0;
    }

    return -1;
}

/* Settles check i of a decided phase; the units the zone was charged in
 * the end, or -1 if it settled nothing. */
static int64_t
ngx_http_throttle_settle_check(ngx_http_request_t      *r,
                               ngx_http_throttle_ctx_t *ctx,
                               ngx_uint_t               i) noexcept
{
    int64_t                    settled, delta;
    ngx_http_throttle_check_t *check = &ctx->checks[i];
    ngx_http_throttle_zone_t  *zone = check->lookup.zone;
    ngx_http_throttle_settle_e result;

    if (check->settle == NULL || zone == NULL
        || !ctx->decision.settle_units(i, 0)) {
        return -1;
    }

    settled = ngx_http_throttle_settle_value(r, check);
    if (settled < 0) {
        return -1;
    }

    delta = *ctx->decision.settle_units(i, settled);

    if (delta == 0) {
        result = NGX_HTTP_THROTTLE_SETTLE_EVEN;

    } else if (ngx_http_throttle_strict(zone)) {
        /* counted when Redis answers */
        if (ngx_http_throttle_strict_settle(r, check, delta) == NGX_OK) {
            return settled;
        }

        result = NGX_HTTP_THROTTLE_SETTLE_LOST;

    } else if (ngx_http_throttle_settle_key(&check->lookup, settled - delta,
                                            settled, check->lookup.now,
                                            r->connection->log)
               != NGX_OK)
    {
        result = NGX_HTTP_THROTTLE_SETTLE_LOST;

    } else {
        result = delta > 0 ? NGX_HTTP_THROTTLE_SETTLE_CHARGED
                           : NGX_HTTP_THROTTLE_SETTLE_REFUNDED;
    }

    ngx_http_throttle_metrics_settled(zone, result);

    return settled;
}

ngx_int_t
ngx_http_throttle_settle_handler(ngx_http_request_t *r) noexcept
{
    int64_t                          settled;
    ngx_uint_t                       p, i;
    ngx_http_throttle_ctx_t         *ctx;
    ngx_http_throttle_request_ctx_t *rctx;

    if (r != r->main) {
        return NGX_OK; /* subrequests settle nothing */
    }

    rctx = ngx_http_throttle_get_ctx(r);
    if (rctx == NULL) {
        return NGX_OK;
    }

    /* concurrent=: whatever the phases decided, the request has ended */
    ngx_http_throttle_free_places(rctx);

    /* refused in one phase: not settled in the other, which admitted it */
    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        if (rctx->phases[p].decision.settles_nothing()) {
            return NGX_OK;
        }
    }

    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        ctx = &rctx->phases[p];

        for (i = 0; i < ctx->nchecks; i++) {
            settled = ngx_http_throttle_settle_check(r, ctx, i);

            /* $throttle_settled: the zone whose answer the client got */
            if (settled >= 0
                && (rctx->settled_units < 0
                    || (int) i == ctx->decision.outcome().binding))
            {
                rctx->settled_units = settled;
            }
        }
    }

    return NGX_OK;
}
