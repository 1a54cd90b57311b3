/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's answers to the calls it decided or settled, written with
 * RapidJSON:
 *
 *     {"allowed":true,"checks":[{"zone":"reply","key":"alice",
 *      "status":"PASSED","limit":16,"remaining":15,"reset_after_ms":2000,
 *      "retry_after_ms":-1,"delay_ms":0,"reservation":"1.1.5000.0.0"}]}
 *     {"settled":true,"checks":[{"zone":"reply","key":"alice",
 *      "status":"SETTLED","charged":-1}]}
 *     {"reset":true,"checks":[{"zone":"reply","key":"alice",
 *      "status":"RESET","units_dropped":0}]}
 *
 * and how every answer of the endpoint is sent, errors included.
 */

#include "ngx_http_throttle_api_json.h"

/* What every check's answer starts with: its zone, its key, its status. */
static bool
ngx_http_throttle_api_write_head(ngx_http_throttle_api_writer_t  &w,
                                 ngx_pool_t                      *pool,
                                 const ngx_http_throttle_given_t *given,
                                 ngx_str_t status) noexcept
{
    const ngx_str_t *zone = &given->zone->name;

    w.StartObject();
    w.Key("zone");
    w.String((const char *) zone->data, (rapidjson::SizeType) zone->len);
    w.Key("key");
    if (!ngx_http_throttle_api_write_string(w, pool, given->key.data,
                                            given->key.len))
    {
        return false;
    }
    w.Key("status");
    return w.String((const char *) status.data,
                    (rapidjson::SizeType) status.len);
}

/* A charged check's reservation, for a settle call to hand back: the
 * cost, the zone's clock when it was charged, a strict zone's tokens. */
static bool
ngx_http_throttle_api_write_reservation(ngx_http_throttle_api_writer_t  &w,
                                        const ngx_http_throttle_ctx_t   *ctx,
                                        const ngx_http_throttle_check_t *check,
                                        ngx_uint_t i) noexcept
{
    char text[throttle::kReservationTextMax + 1];
    auto reserved = ctx->decision.reserved_units(i);

    if (!reserved) {
        return true;
    }

    throttle::Reservation r{
        *reserved, check->lookup.now, {check->tokens[0], check->tokens[1]}};

    w.Key("reservation");
    return w.String(text,
                    (rapidjson::SizeType) throttle::format_reservation(r, text),
                    true);
}

/*
 * One check's answer: its zone's own verdict (as
 * nginx_throttle_requests_total counts it: a check that would pass in a
 * set another check rejected is PASSED, and was not charged), and the
 * zone's figures, null when the zone could not decide (ERROR_ALLOWED,
 * ERROR_DENIED).
 */
static bool
ngx_http_throttle_api_write_check(
    ngx_http_throttle_api_writer_t &w, const ngx_http_throttle_ctx_t *ctx,
    const ngx_http_throttle_check_t *check,
    const ngx_http_throttle_given_t *given) noexcept
{
    ngx_uint_t       i = (ngx_uint_t) (check - ctx->checks);
    throttle::Status verdict = ctx->decision.verdict(i);
    bool             decided = verdict != throttle::Status::error_allowed
        && verdict != throttle::Status::error_denied;

    const throttle::ZoneCheck      &part = ctx->decision.check(i);
    const throttle::ThrottleResult &res = part.decision.result;

    if (!ngx_http_throttle_api_write_head(
            w, ctx->request->pool, given,
            ngx_http_throttle_status_name(verdict)))
    {
        return false;
    }

    const struct {
        const char *name;
        int64_t     value;
    } figures[] = {
        {"limit", res.limit},
        {"remaining", res.remaining},
        {"reset_after_ms", throttle::ceil_millis(res.reset_after_us)},
        {"retry_after_ms",
         res.retry_after_us < 0 ? -1
                                : throttle::ceil_millis(res.retry_after_us)},
        {"delay_ms", throttle::ceil_millis(part.wait_us)}};

    for (const auto &f : figures) {
        w.Key(f.name);
        if (decided) {
            w.Int64(f.value);
        } else {
            w.Null();
        }
    }

    if (!ngx_http_throttle_api_write_reservation(w, ctx, check, i)) {
        return false;
    }

    return w.EndObject();
}

/* A settle check's answer: the units its key was charged ("charged",
 * negative when given back); a reset's: the units it dropped (an async
 * key's not synced yet, "units_dropped"). */
static bool
ngx_http_throttle_api_write_counted(ngx_http_throttle_api_writer_t &w,
                                    ngx_http_throttle_api_call_t   *call,
                                    ngx_uint_t                      i) noexcept
{
    static ngx_str_t settled = ngx_string("SETTLED");
    static ngx_str_t reset = ngx_string("RESET");

    if (!ngx_http_throttle_api_write_head(w, call->request->pool,
                                          &call->checks[i],
                                          call->resets ? reset : settled))
    {
        return false;
    }

    w.Key(call->resets ? "units_dropped" : "charged");
    w.Int64(call->resets ? call->reset.units_dropped
                         : call->settles_asked[i].delta_units);
    return w.EndObject();
}

/* The check of a zone among the decision's (sorted by zone name). */
static const ngx_http_throttle_check_t *
ngx_http_throttle_api_check_of(const ngx_http_throttle_ctx_t  *ctx,
                               const ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->checks[i].lookup.zone == zone) {
            return &ctx->checks[i];
        }
    }

    return NULL;
}

/* A decision's answer ("allowed"), or a settle or reset call's
 * ("settled", "reset": ctx is NULL), its checks in the caller's order. */
ngx_int_t
ngx_http_throttle_api_answer(ngx_http_throttle_api_call_t  *call,
                             const ngx_http_throttle_ctx_t *ctx, bool allowed,
                             ngx_str_t *json) noexcept
{
    bool                             ok;
    ngx_uint_t                       i;
    rapidjson::StringBuffer          sb;
    ngx_http_throttle_api_writer_t   w(sb);
    const ngx_http_throttle_check_t *check;

    w.StartObject();
    w.Key(call->resets ? "reset" : call->settles ? "settled" : "allowed");
    w.Bool(allowed);
    w.Key("checks");
    w.StartArray();

    for (i = 0; i < call->nchecks; i++) {
        if (call->settles || call->resets) {
            ok = ngx_http_throttle_api_write_counted(w, call, i);

        } else {
            check = ngx_http_throttle_api_check_of(ctx, call->checks[i].zone);
            ok = check
                && ngx_http_throttle_api_write_check(w, ctx, check,
                                                     &call->checks[i]);
        }

        if (!ok) {
            return NGX_ERROR;
        }
    }

    w.EndArray();
    w.EndObject();

    return ngx_http_throttle_api_copy_out(call->request->pool, sb, json);
}

/* Sends "json" with "status". */
ngx_int_t
ngx_http_throttle_api_send(ngx_http_request_t *r, ngx_uint_t status,
                           ngx_str_t *json) noexcept
{
    ngx_buf_t *b;

    b = (ngx_buf_t *) ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = json->data;
    b->last = json->data + json->len;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    return ngx_http_throttle_send(r, status, b);
}

/* {"error":"..."} with "status". */
ngx_int_t
ngx_http_throttle_api_send_error(ngx_http_request_t *r, ngx_uint_t status,
                                 const ngx_str_t *error) noexcept
{
    ngx_str_t json;

    if (ngx_http_throttle_api_error(r->pool, error, &json) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_api_send(r, status, &json);
}

/* Refuses a request before its body is read: the body is discarded. */
ngx_int_t
ngx_http_throttle_api_turn_away(ngx_http_request_t *r, ngx_uint_t status,
                                const ngx_str_t *error) noexcept
{
    ngx_int_t rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_throttle_api_send_error(r, status, error);
}
