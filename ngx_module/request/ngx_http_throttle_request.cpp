/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A main request's context: made once, with a decision per phase and one
 * for a throttle_api call, found again after an internal redirect, and
 * which of its decisions the client's answer comes from.
 */

#include "ngx_http_throttle_request.h"

#include <new>

static void
ngx_http_throttle_ctx_marker(void *data) noexcept
{
    /* nothing to free: the cleanup only lets the context be found again
     * after an internal redirect has wiped the module contexts */
}

ngx_http_throttle_request_ctx_t *
ngx_http_throttle_get_ctx(ngx_http_request_t *r) noexcept
{
    ngx_pool_cleanup_t              *cln;
    ngx_http_throttle_request_ctx_t *ctx;

    r = r->main;

    ctx = (ngx_http_throttle_request_ctx_t *) ngx_http_get_module_ctx(
        r, ngx_http_throttle_module);

    if (ctx == NULL && (r->internal || r->filter_finalize)) {

        for (cln = r->pool->cleanup; cln; cln = cln->next) {
            if (cln->handler == ngx_http_throttle_ctx_marker) {
                ctx = (ngx_http_throttle_request_ctx_t *) cln->data;
                ngx_http_set_ctx(r, ctx, ngx_http_throttle_module);
                break;
            }
        }
    }

    return ctx;
}

ngx_http_throttle_request_ctx_t *
ngx_http_throttle_create_ctx(ngx_http_request_t *r) noexcept
{
    ngx_pool_cleanup_t              *cln;
    ngx_http_throttle_request_ctx_t *ctx;

    cln = ngx_pool_cleanup_add(r->main->pool,
                               sizeof(ngx_http_throttle_request_ctx_t));
    if (cln == NULL) {
        return NULL;
    }

    ctx = new (cln->data) ngx_http_throttle_request_ctx_t();
    ctx->settled_units = -1;
    cln->handler = ngx_http_throttle_ctx_marker;

    ngx_http_set_ctx(r->main, ctx, ngx_http_throttle_module);

    return ctx;
}

/*
 * The phase whose answer the client gets, in headers and variables, when
 * both decided (throttle::answers_before()). A throttle_api location's
 * decision comes before either. NULL if nothing decided.
 */
const ngx_http_throttle_ctx_t *
ngx_http_throttle_answer(ngx_http_request_t *r) noexcept
{
    ngx_uint_t                       p;
    const ngx_http_throttle_ctx_t   *ctx, *best = NULL;
    ngx_http_throttle_request_ctx_t *rctx = ngx_http_throttle_get_ctx(r);

    if (rctx == NULL) {
        return NULL;
    }

    /* the response of a throttle_api location is its answer to the
     * caller's checks */
    if (ngx_http_throttle_status(&rctx->api) != throttle::Status::none) {
        return &rctx->api;
    }

    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        ctx = &rctx->phases[p];

        if (ngx_http_throttle_status(ctx) == throttle::Status::none) {
            continue;
        }

        if (best == NULL
            || throttle::answers_before(ngx_http_throttle_phase_answer(ctx),
                                        ngx_http_throttle_phase_answer(best)))
        {
            best = ctx;
        }
    }

    return best;
}
