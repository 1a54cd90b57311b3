/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * $throttle_status, $throttle_limit, $throttle_remaining, $throttle_reset,
 * $throttle_retry_after: the decision about the main request, for logs and
 * for other modules. The numbers describe the binding zone (of the phase
 * whose answer counts, ngx_http_throttle_answer()). $throttle_delay: how
 * long the request was held back (delay=), in milliseconds, over both
 * phases. $throttle_settled: the units settle= charged in the end (known
 * in the log phase, once the request ended).
 */

#include "ngx_http_throttle_request.h"

#include "throttle/headers.hpp"

enum ngx_http_throttle_var_e {
    NGX_HTTP_THROTTLE_VAR_LIMIT,
    NGX_HTTP_THROTTLE_VAR_REMAINING,
    NGX_HTTP_THROTTLE_VAR_RESET,
    NGX_HTTP_THROTTLE_VAR_RETRY_AFTER
};

static void
ngx_http_throttle_set_value(ngx_http_variable_value_t *v, u_char *data,
                            size_t len) noexcept
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
}

static ngx_int_t
ngx_http_throttle_status_variable(ngx_http_request_t        *r,
                                  ngx_http_variable_value_t *v,
                                  uintptr_t                  data) noexcept
{
    const ngx_http_throttle_ctx_t *ctx = ngx_http_throttle_answer(r);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_str_t name =
        ngx_http_throttle_status_name(ngx_http_throttle_status(ctx));

    ngx_http_throttle_set_value(v, name.data, name.len);
    return NGX_OK;
}

static ngx_int_t
ngx_http_throttle_number_variable(ngx_http_request_t        *r,
                                  ngx_http_variable_value_t *v,
                                  uintptr_t                  data) noexcept
{
    int64_t                        value;
    u_char                        *p;
    const ngx_http_throttle_ctx_t *ctx = ngx_http_throttle_answer(r);

    if (ctx == NULL || ngx_http_throttle_binding(ctx) == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    const throttle::ThrottleResult &res = ctx->decision.outcome().result;

    switch (data) {
    case NGX_HTTP_THROTTLE_VAR_LIMIT:
        value = res.limit;
        break;
    case NGX_HTTP_THROTTLE_VAR_REMAINING:
        value = res.remaining;
        break;
    case NGX_HTTP_THROTTLE_VAR_RESET:
        value = throttle::ceil_seconds(res.reset_after_us);
        break;
    default: /* NGX_HTTP_THROTTLE_VAR_RETRY_AFTER: 0 when it passed */
        value = throttle::ceil_seconds(res.retry_after_us);
        break;
    }

    p = (u_char *) ngx_pnalloc(r->pool, 20);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_http_throttle_set_value(v, p, throttle::format_int((char *) p, value));
    return NGX_OK;
}

static ngx_int_t
ngx_http_throttle_delay_variable(ngx_http_request_t        *r,
                                 ngx_http_variable_value_t *v,
                                 uintptr_t                  data) noexcept
{
    u_char                          *p;
    ngx_uint_t                       phase;
    ngx_msec_t                       delay = 0;
    ngx_http_throttle_request_ctx_t *rctx;
    const ngx_http_throttle_ctx_t   *ctx = ngx_http_throttle_answer(r);

    /* as the numbers: empty where no zone's answer counts */
    if (ctx == NULL || ngx_http_throttle_binding(ctx) == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    /* each phase that decided held the request back in turn (a dry run:
     * would have) */
    rctx = ngx_http_throttle_get_ctx(r);

    for (phase = 0; phase < NGX_HTTP_THROTTLE_NPHASES; phase++) {
        delay += (ngx_msec_t) rctx->phases[phase].decision.outcome().delay_ms;
    }

    p = (u_char *) ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_http_throttle_set_value(v, p, ngx_sprintf(p, "%M", delay) - p);
    return NGX_OK;
}

static ngx_int_t
ngx_http_throttle_settled_variable(ngx_http_request_t        *r,
                                   ngx_http_variable_value_t *v,
                                   uintptr_t                  data) noexcept
{
    u_char                          *p;
    ngx_http_throttle_request_ctx_t *rctx = ngx_http_throttle_get_ctx(r);

    if (rctx == NULL || rctx->settled_units < 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = (u_char *) ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_http_throttle_set_value(v, p,
                                ngx_sprintf(p, "%L", rctx->settled_units) - p);
    return NGX_OK;
}

static ngx_http_variable_t ngx_http_throttle_vars[] = {

    {ngx_string("throttle_status"), NULL, ngx_http_throttle_status_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_limit"), NULL, ngx_http_throttle_number_variable,
     NGX_HTTP_THROTTLE_VAR_LIMIT, NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_remaining"), NULL, ngx_http_throttle_number_variable,
     NGX_HTTP_THROTTLE_VAR_REMAINING, NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_reset"), NULL, ngx_http_throttle_number_variable,
     NGX_HTTP_THROTTLE_VAR_RESET, NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_retry_after"), NULL,
     ngx_http_throttle_number_variable, NGX_HTTP_THROTTLE_VAR_RETRY_AFTER,
     NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_delay"), NULL, ngx_http_throttle_delay_variable, 0,
     NGX_HTTP_VAR_NOCACHEABLE, 0},

    {ngx_string("throttle_settled"), NULL, ngx_http_throttle_settled_variable,
     0, NGX_HTTP_VAR_NOCACHEABLE, 0},

    ngx_http_null_variable};

ngx_int_t
ngx_http_throttle_add_variables(ngx_conf_t *cf) noexcept
{
    ngx_http_variable_t *var, *v;

    for (v = ngx_http_throttle_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}
