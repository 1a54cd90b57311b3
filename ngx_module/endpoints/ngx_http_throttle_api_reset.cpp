/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's resets: with "reset=on", a DELETE makes one key of a zone
 * a fresh key from then on (docs/api.md, "Resetting a key"):
 *
 *     DELETE /throttle?zone=reply&key=alice
 *     DELETE /throttle  {"zone":"reply","key":"alice"}
 *
 * The zone forgets the key at once (throttle::Policy::reset():
 * ngx_http_throttle_reset_key() empties its slot, and drops an async
 * key's units not synced yet; a strict zone keeps a fence instead), then a
 * strict or async zone deletes the key in Redis (the reset script, by the
 * name the zone's own scripts give it), and the call waits for Redis's
 * answer without blocking, as a settle does: the caller is there to be
 * told that Redis did not delete it (503), and a reset can be sent again.
 * Other nginx are not told: what they hold of the key stays theirs until
 * it passes (docs/api.md says how long).
 */

#include "ngx_http_throttle_api.h"

#include <hiredis/hiredis.h>

/* The methods the location answers but POST: DELETE too with reset=on. */
ngx_uint_t
ngx_http_throttle_api_methods(ngx_http_request_t *r) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf =
        (ngx_http_throttle_loc_conf_t *) ngx_http_get_module_loc_conf(
            r, ngx_http_throttle_module);

    return NGX_HTTP_GET | NGX_HTTP_HEAD
        | (tlcf->api_reset ? NGX_HTTP_DELETE : 0);
}

/* 405, with the methods the location answers; a DELETE where resets are
 * off is told what it needs. */
ngx_int_t
ngx_http_throttle_api_not_allowed(ngx_http_request_t *r) noexcept
{
    ngx_uint_t resets =
        (ngx_http_throttle_api_methods(r) & NGX_HTTP_DELETE) ? 1 : 0;

    static ngx_str_t allow = ngx_string("Allow");
    static ngx_str_t allowed[] = {ngx_string("GET, HEAD, POST"),
                                  ngx_string("GET, HEAD, POST, DELETE")};
    static ngx_str_t not_allowed[] = {
        ngx_string("method not allowed: use GET, HEAD or POST"),
        ngx_string("method not allowed: use GET, HEAD, POST or DELETE")};
    static ngx_str_t no_reset =
        ngx_string("method not allowed: use GET, HEAD or POST (a DELETE "
                   "resets a key where \"throttle_api\" has \"reset=on\")");

    if (ngx_http_throttle_add_header(r, allow, allowed[resets].data,
                                     allowed[resets].len)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_api_turn_away(
        r, NGX_HTTP_NOT_ALLOWED,
        r->method == NGX_HTTP_DELETE ? &no_reset : &not_allowed[resets]);
}

bool
ngx_http_throttle_api_reset_body(ngx_http_request_t *r) noexcept
{
    return r->method == NGX_HTTP_DELETE
        && (ngx_http_throttle_api_methods(r) & NGX_HTTP_DELETE)
        && ngx_http_throttle_api_has_body(r);
}

/* The answer: 200 and what was dropped, or 503 if Redis did not delete
 * the key (the zone has forgotten it all the same). */
static ngx_int_t
ngx_http_throttle_api_reset_reply(ngx_http_throttle_api_call_t *call) noexcept
{
    u_char                        *p;
    ngx_str_t                      json, error;
    ngx_http_throttle_api_reset_t *reset = &call->reset;
    const ngx_str_t               *zone = &reset->check.lookup.zone->name;

    if (reset->failed.len == 0) {
        if (ngx_http_throttle_api_answer(call, NULL, true, &json) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_http_throttle_api_send(call->request, NGX_HTTP_OK, &json);
    }

    error.len = sizeof("zone \"\": the key is reset in this nginx, not in "
                       "Redis: ")
        - 1 + zone->len + reset->failed.len;
    error.data = (u_char *) ngx_pnalloc(call->request->pool, error.len);
    if (error.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(error.data,
                    "zone \"%V\": the key is reset in this nginx, not in "
                    "Redis: %V",
                    zone, &reset->failed);
    error.len = p - error.data;

    return ngx_http_throttle_api_send_error(
        call->request, NGX_HTTP_SERVICE_UNAVAILABLE, &error);
}

/* Redis has answered the reset script (or failed within the backend's
 * timeout). */
static void
ngx_http_throttle_api_reset_done(void *data, redisReply *reply, const char *err,
                                 bool sent) noexcept
{
    ngx_connection_t              *c;
    ngx_http_request_t            *r;
    ngx_http_throttle_api_call_t  *call = (ngx_http_throttle_api_call_t *) data;
    ngx_http_throttle_api_reset_t *reset = &call->reset;

    reset->check.cmd = NULL;
    reset->answered = true;

    /* the script answers how many keys it deleted */
    if ((reply == NULL || reply->type != REDIS_REPLY_INTEGER)
        && ngx_http_throttle_api_redis_failure(call->request->pool, reply, err,
                                               sent, "deleted it",
                                               &reset->failed)
            != NGX_OK)
    {
        ngx_str_set(&reset->failed, "Redis did not delete it");
    }

    if (--call->replies_awaited == 0) {
        r = call->request;
        c = r->connection;
        ngx_http_finalize_request(r, ngx_http_throttle_api_reset_reply(call));
        ngx_http_run_posted_requests(c);
    }
}

/* The call is going away: Redis's answer, when it comes, is dropped. */
static void
ngx_http_throttle_api_reset_cleanup(void *data) noexcept
{
    ngx_http_throttle_api_reset_t *reset =
        (ngx_http_throttle_api_reset_t *) data;

    if (reset->check.cmd) {
        ngx_http_throttle_redis_detach(reset->check.cmd);
        reset->check.cmd = NULL;
    }
}

/* Deletes the key in Redis; NGX_DONE while Redis answers. */
static ngx_int_t
ngx_http_throttle_api_reset_redis(ngx_http_throttle_api_call_t *call) noexcept
{
    ngx_pool_cleanup_t            *cln;
    ngx_http_throttle_redis_cmd_t *cmd;
    ngx_http_throttle_api_reset_t *reset = &call->reset;

    cln = ngx_pool_cleanup_add(call->request->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_http_throttle_api_reset_cleanup;
    cln->data = reset;

    /* the answer waits for both the script's answer and this return (the
     * transport answers in a later event, as it posts its writes; this
     * holds even if it ever answered from within the send) */
    call->replies_awaited = 2;

    cmd = ngx_http_throttle_reset_send(call->request->pool, &reset->check,
                                       ngx_http_throttle_api_reset_done, call);

    /* an answer that came from within the send would have ended the
     * command already, and counted itself */
    if (reset->answered) {
        /* void */

    } else if (cmd == NULL) {
        call->replies_awaited--;
        ngx_str_set(&reset->failed, "Redis cannot be asked now");

    } else {
        reset->check.cmd = cmd;
    }

    if (--call->replies_awaited > 0) {
        return NGX_DONE;
    }

    return ngx_http_throttle_api_reset_reply(call);
}

ngx_int_t
ngx_http_throttle_api_reset(ngx_http_throttle_api_call_t *call) noexcept
{
    int64_t                        answered_by = 0;
    ngx_log_t                     *log = call->request->connection->log;
    ngx_http_throttle_api_reset_t *reset = &call->reset;
    ngx_http_throttle_zone_t      *zone = call->checks[0].zone;

    reset->check.lookup.zone = zone;
    reset->check.lookup.key =
        throttle::ZoneKey(call->checks[0].key.data, call->checks[0].key.len);

    /* Redis will have run the script (or the call timed out) by then */
    if (zone->redis) {
        answered_by =
            zone->policy.now_us() + (int64_t) zone->redis->timeout * 1000;
    }

    reset->units_dropped =
        ngx_http_throttle_reset_key(&reset->check.lookup, answered_by, log);

    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "throttle zone \"%V\": a key is reset through "
                  "throttle_api; %L units not synced were dropped",
                  &zone->name, reset->units_dropped);

    if (zone->policy.reset_call().script == NULL) {
        return ngx_http_throttle_api_reset_reply(call);
    }

    return ngx_http_throttle_api_reset_redis(call);
}
