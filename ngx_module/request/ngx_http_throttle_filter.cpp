/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The header filter: tells clients where they stand. Runs for the final
 * response of a throttled main request, whether it passed, was rejected,
 * or went through error_page.
 */

#include "ngx_http_throttle_request.h"

#include "throttle/headers.hpp"

static ngx_http_output_header_filter_pt ngx_http_next_header_filter;

ngx_int_t
ngx_http_throttle_add_header(ngx_http_request_t *r, ngx_str_t name,
                             u_char *value, size_t len) noexcept
{
    ngx_table_elt_t *h;

    h = (ngx_table_elt_t *) ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key = name;
    h->value.data = value;
    h->value.len = len;

    return NGX_OK;
}

/* Sends a response whose body is "b", whole, in memory: for the module's
 * own content handlers, which set the content type. */
ngx_int_t
ngx_http_throttle_send(ngx_http_request_t *r, ngx_uint_t status,
                       ngx_buf_t *b) noexcept
{
    ngx_int_t   rc;
    ngx_chain_t out;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}

static ngx_int_t
ngx_http_throttle_add_int(ngx_http_request_t *r, ngx_str_t name,
                          int64_t value) noexcept
{
    u_char *p;

    p = (u_char *) ngx_pnalloc(r->pool, 20);
    if (p == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_throttle_add_header(
        r, name, p, throttle::format_int((char *) p, value));
}

static ngx_int_t
ngx_http_throttle_add_fields(ngx_http_request_t            *r,
                             const ngx_http_throttle_ctx_t *ctx) noexcept
{
    u_char                   *p;
    size_t                    cap;
    std::string_view          name;
    ngx_http_throttle_zone_t *zone = ngx_http_throttle_binding(ctx);
    /* the request's own: a plan's, where the zone's rate= is a variable */
    const throttle::Policy &binding = *ngx_http_throttle_binding_policy(ctx);

    static ngx_str_t policy = ngx_string("RateLimit-Policy");
    static ngx_str_t ratelimit = ngx_string("RateLimit");

    name = {(const char *) zone->name.data, zone->name.len};
    cap = throttle::max_header_value_len(zone->name.len);

    p = (u_char *) ngx_pnalloc(r->pool, 2 * cap);
    if (p == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_throttle_add_header(
            r, policy, p,
            throttle::format_ratelimit_policy((char *) p, name, binding))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    p += cap;

    return ngx_http_throttle_add_header(
        r, ratelimit, p,
        throttle::format_ratelimit((char *) p, name, binding,
                                   ctx->decision.outcome().result));
}

static ngx_int_t
ngx_http_throttle_add_legacy(ngx_http_request_t            *r,
                             const ngx_http_throttle_ctx_t *ctx) noexcept
{
    static ngx_str_t limit = ngx_string("X-RateLimit-Limit");
    static ngx_str_t remaining = ngx_string("X-RateLimit-Remaining");
    static ngx_str_t reset = ngx_string("X-RateLimit-Reset");

    if (ngx_http_throttle_add_int(r, limit,
                                  ctx->decision.outcome().result.limit)
            != NGX_OK
        || ngx_http_throttle_add_int(r, remaining,
                                     ctx->decision.outcome().result.remaining)
            != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_throttle_add_int(
        r, reset,
        throttle::ceil_seconds(ctx->decision.outcome().result.reset_after_us));
}

static ngx_int_t
ngx_http_throttle_header_filter(ngx_http_request_t *r) noexcept
{
    ngx_int_t                      rc = NGX_OK;
    const ngx_http_throttle_ctx_t *ctx;

    static ngx_str_t retry_after = ngx_string("Retry-After");

    if (r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_http_throttle_answer(r);

    if (ctx == NULL || ngx_http_throttle_binding(ctx) == NULL
        || ctx->tlcf->headers == NGX_HTTP_THROTTLE_HEADERS_OFF)
    {
        return ngx_http_next_header_filter(r);
    }

    if (ngx_http_throttle_status(ctx) == throttle::Status::rejected
        && ctx->decision.outcome().result.retry_after_us >= 0)
    {
        rc = ngx_http_throttle_add_int(
            r, retry_after,
            throttle::ceil_seconds(
                ctx->decision.outcome().result.retry_after_us));
    }

    if (rc == NGX_OK) {
        rc = ctx->tlcf->headers == NGX_HTTP_THROTTLE_HEADERS_LEGACY
            ? ngx_http_throttle_add_legacy(r, ctx)
            : ngx_http_throttle_add_fields(r, ctx);
    }

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_next_header_filter(r);
}

ngx_int_t
ngx_http_throttle_filter_init(ngx_conf_t *cf) noexcept
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_throttle_header_filter;

    return NGX_OK;
}
