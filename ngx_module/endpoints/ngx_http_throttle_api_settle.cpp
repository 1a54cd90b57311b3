/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's settle calls: application code that reserved units with
 * a decision (or reserved none) tells what it used, and the key is charged
 * the difference, or given it back, as a "throttle" line's settle= does
 * when its request ends. A settle is never rejected: the units were used.
 *
 * Local and async zones settle at once, through the zone
 * (ngx_http_throttle_settle_key(), settle='s own). A strict zone sends its
 * settle script, and the call waits for Redis's answer without blocking,
 * as a decision does: unlike settle=, which no one waits for, the caller
 * is there to be told that Redis did not take it (503), and only it can
 * choose to try again.
 */

#include "ngx_http_throttle_api.h"
#include "ngx_http_throttle_zone_metrics.h"

#include <hiredis/hiredis.h>

/* A settle whose answer has not come yet. */
#define NGX_HTTP_THROTTLE_API_SETTLING NGX_HTTP_THROTTLE_SETTLE_RESULTS

/* What a settle that was not lost did to its key. */
static ngx_http_throttle_settle_e
ngx_http_throttle_api_settle_result(
    const ngx_http_throttle_api_settle_t *settle) noexcept
{
    return settle->delta_units > 0 ? NGX_HTTP_THROTTLE_SETTLE_CHARGED
                                   : NGX_HTTP_THROTTLE_SETTLE_REFUNDED;
}

/* The answer once every check is settled: the first one lost, if any,
 * makes it a 503 that says why; the other checks stay settled. */
static ngx_int_t
ngx_http_throttle_api_settle_reply(ngx_http_throttle_api_call_t *call) noexcept
{
    u_char                         *p;
    ngx_str_t                       json, error;
    ngx_uint_t                      i;
    ngx_http_throttle_api_settle_t *settle;

    for (i = 0; i < call->nchecks; i++) {
        settle = &call->settles_asked[i];

        if (settle->result != NGX_HTTP_THROTTLE_SETTLE_LOST) {
            continue;
        }

        error.len = sizeof("the settle of zone \"\" is lost: ") - 1
            + settle->check.lookup.zone->name.len + settle->lost.len;
        error.data = (u_char *) ngx_pnalloc(call->request->pool, error.len);
        if (error.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        p = ngx_sprintf(error.data, "the settle of zone \"%V\" is lost: %V",
                        &settle->check.lookup.zone->name, &settle->lost);
        error.len = p - error.data;

        return ngx_http_throttle_api_send_error(
            call->request, NGX_HTTP_SERVICE_UNAVAILABLE, &error);
    }

    if (ngx_http_throttle_api_answer(call, NULL, true, &json) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_api_send(call->request, NGX_HTTP_OK, &json);
}

/* Why Redis did not run a script, for the caller: the transport's reason
 * lives only as long as its callback, so it is copied. */
ngx_int_t
ngx_http_throttle_api_redis_failure(ngx_pool_t *pool, const redisReply *reply,
                                    const char *err, bool sent,
                                    const char *would, ngx_str_t *why) noexcept
{
    size_t  len;
    u_char *p;

    if (reply) {
        err = reply->str ? reply->str : "an error";
        len = sizeof("Redis answered: ") - 1 + ngx_min(reply->len, 200);

    } else {
        err = err ? err : "no answer";
        len = sizeof("Redis did not answer (); it may still have ") - 1
            + ngx_strlen(err) + ngx_strlen(would);
    }

    p = (u_char *) ngx_pnalloc(pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    why->data = p;
    why->len = (reply ? ngx_snprintf(p, len, "Redis answered: %*s",
                                     ngx_min(reply->len, 200), err)
                      : ngx_snprintf(p, len, "Redis did not answer (%s)%s%s",
                                     err, sent ? "; it may still have " : "",
                                     sent ? would : ""))
        - p;
    return NGX_OK;
}

/* A strict zone's settle script has its answer (or failed within the
 * backend's timeout): once all are in, the call is answered. */
static void
ngx_http_throttle_api_settle_done(void *data, redisReply *reply,
                                  const char *err, bool sent) noexcept
{
    ngx_connection_t               *c;
    ngx_http_request_t             *r;
    ngx_http_throttle_api_call_t   *call;
    ngx_http_throttle_api_settle_t *settle =
        (ngx_http_throttle_api_settle_t *) data;

    settle->check.cmd = NULL;

    if (ngx_http_throttle_strict_settle_taken(reply)) {
        settle->result = ngx_http_throttle_api_settle_result(settle);

    } else {
        settle->result = NGX_HTTP_THROTTLE_SETTLE_LOST;
        if (ngx_http_throttle_api_redis_failure(settle->call->request->pool,
                                                reply, err, sent, "applied it",
                                                &settle->lost)
            != NGX_OK)
        {
            ngx_str_set(&settle->lost, "Redis did not take it");
        }
    }

    ngx_http_throttle_metrics_settled(settle->check.lookup.zone,
                                      settle->result);

    call = settle->call;

    if (--call->replies_awaited == 0) {
        r = call->request;
        c = r->connection;
        ngx_http_finalize_request(r, ngx_http_throttle_api_settle_reply(call));
        ngx_http_run_posted_requests(c);
    }
}

/* The call is going away: answers still on their way are dropped. */
static void
ngx_http_throttle_api_settle_cleanup(void *data) noexcept
{
    ngx_uint_t                    i;
    ngx_http_throttle_api_call_t *call = (ngx_http_throttle_api_call_t *) data;

    for (i = 0; i < call->nchecks; i++) {
        if (call->settles_asked[i].check.cmd) {
            ngx_http_throttle_redis_detach(call->settles_asked[i].check.cmd);
            call->settles_asked[i].check.cmd = NULL;
        }
    }
}

/* A strict zone's settle: its script sent, its answer awaited. */
static void
ngx_http_throttle_api_settle_strict(
    ngx_http_throttle_api_settle_t *settle) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;
    ngx_http_throttle_api_call_t  *call = settle->call;

    if (settle->reserved) {
        settle->check.tokens[0] = settle->reservation.tokens[0];
        settle->check.tokens[1] = settle->reservation.tokens[1];
    }

    settle->result = NGX_HTTP_THROTTLE_API_SETTLING;

    cmd = ngx_http_throttle_strict_settle_send(
        call->request->pool, &settle->check, settle->delta_units,
        ngx_http_throttle_api_settle_done, settle);

    if (cmd == NULL) {
        settle->result = NGX_HTTP_THROTTLE_SETTLE_LOST;
        ngx_str_set(&settle->lost, "Redis cannot be asked now");
        ngx_http_throttle_metrics_settled(settle->check.lookup.zone,
                                          settle->result);
        return;
    }

    /* the transport never answers from within the send (it posts its
     * write): the answer comes in a later event */
    call->replies_awaited++;
    settle->check.cmd = cmd;
}

/* A local or async zone's settle, at once, under the zone's lock. */
static void
ngx_http_throttle_api_settle_zone(ngx_http_throttle_api_settle_t *settle,
                                  ngx_log_t                      *log) noexcept
{
    const throttle::Reservation *reserved =
        settle->reserved ? &settle->reservation : NULL;

    /* without a reservation all is a charge, which needs no time */
    if (ngx_http_throttle_settle_key(
            &settle->check.lookup, reserved ? reserved->cost_units : 0,
            settle->settled_units, reserved ? reserved->at_us : 0, log)
        == NGX_OK)
    {
        settle->result = ngx_http_throttle_api_settle_result(settle);

    } else {
        settle->result = NGX_HTTP_THROTTLE_SETTLE_LOST;
        ngx_str_set(&settle->lost, "the zone has no room left for the key");
    }

    ngx_http_throttle_metrics_settled(settle->check.lookup.zone,
                                      settle->result);
}

ngx_int_t
ngx_http_throttle_api_settle(ngx_http_throttle_api_call_t *call) noexcept
{
    ngx_uint_t                      i;
    ngx_pool_cleanup_t             *cln;
    ngx_http_throttle_zone_t       *zone;
    ngx_http_throttle_api_settle_t *settle;

    cln = ngx_pool_cleanup_add(call->request->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_http_throttle_api_settle_cleanup;
    cln->data = call;

    call->replies_awaited = 1; /* no answer before every script is out */

    for (i = 0; i < call->nchecks; i++) {
        settle = &call->settles_asked[i];
        zone = call->checks[i].zone;

        settle->check.lookup.zone = zone;
        settle->check.lookup.key = throttle::ZoneKey(call->checks[i].key.data,
                                                     call->checks[i].key.len);
        /* a zone of plans: the one this call's variables give (logged if
         * none) */
        settle->check.lookup.policy =
            ngx_http_throttle_plan(call->request, zone, &settle->check.plan);
        settle->delta_units = throttle::settle_delta_units(
            settle->reserved ? &settle->reservation : NULL,
            settle->settled_units);

        if (settle->check.lookup.policy == NULL) {
            settle->result = NGX_HTTP_THROTTLE_SETTLE_LOST;
            ngx_str_set(&settle->lost,
                        "the zone's rate= or burst= gives no "
                        "plan for this call");
            ngx_http_throttle_metrics_settled(zone, settle->result);

        } else if (settle->delta_units == 0) {
            settle->result = NGX_HTTP_THROTTLE_SETTLE_EVEN;
            ngx_http_throttle_metrics_settled(zone, settle->result);

        } else if (ngx_http_throttle_strict(zone)) {
            ngx_http_throttle_api_settle_strict(settle);

        } else {
            ngx_http_throttle_api_settle_zone(settle,
                                              call->request->connection->log);
        }
    }

    if (--call->replies_awaited > 0) {
        return NGX_DONE;
    }

    return ngx_http_throttle_api_settle_reply(call);
}
