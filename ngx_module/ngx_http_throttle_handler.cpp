/*
 * The preaccess-phase handler, and how it is entered again.
 *
 * A main request is decided once, over every "throttle" line of its
 * location (ngx_http_throttle_decide.cpp). The decision lives in a context
 * kept in the request's pool, and the handler reads it to know where the
 * request stands each time nginx runs the phases:
 *
 *   - no context: the first time. One is made and the decision starts.
 *     Local and async zones, and strict zones' denial caches, decide at
 *     once. If a strict zone must ask Redis, the handler returns NGX_AGAIN
 *     with ctx->waiting set: the request waits for the replies, and no
 *     worker blocks.
 *   - ctx->waiting: nginx ran the phases again before Redis answered (a
 *     client event, a subrequest): still NGX_AGAIN.
 *   - ctx->resume: every reply is in, or has failed within the backend's
 *     timeout. ngx_http_throttle_resume() completed the decision, kept its
 *     result in ctx->rc and ran the phases again: the handler returns
 *     ctx->rc, once.
 *   - otherwise: decided already, before an internal redirect (which wipes
 *     module contexts: a pool cleanup marks the context so that it can be
 *     found again) or in an earlier pass. NGX_DECLINED: a request counts
 *     once.
 */

#include "ngx_http_throttle_module.h"

#include <new>

static void
ngx_http_throttle_ctx_marker(void *data) noexcept
{
    /* nothing to free: the cleanup only lets the context be found again
     * after an internal redirect has wiped the module contexts */
}

ngx_http_throttle_ctx_t *
ngx_http_throttle_get_ctx(ngx_http_request_t *r) noexcept
{
    ngx_pool_cleanup_t      *cln;
    ngx_http_throttle_ctx_t *ctx;

    r = r->main;

    ctx = (ngx_http_throttle_ctx_t *) ngx_http_get_module_ctx(
        r, ngx_http_throttle_module);

    if (ctx == NULL && (r->internal || r->filter_finalize)) {

        for (cln = r->pool->cleanup; cln; cln = cln->next) {
            if (cln->handler == ngx_http_throttle_ctx_marker) {
                ctx = (ngx_http_throttle_ctx_t *) cln->data;
                ngx_http_set_ctx(r, ctx, ngx_http_throttle_module);
                break;
            }
        }
    }

    return ctx;
}

static ngx_http_throttle_ctx_t *
ngx_http_throttle_create_ctx(ngx_http_request_t           *r,
                             ngx_http_throttle_loc_conf_t *tlcf) noexcept
{
    ngx_pool_cleanup_t      *cln;
    ngx_http_throttle_ctx_t *ctx;

    cln = ngx_pool_cleanup_add(r->main->pool, sizeof(ngx_http_throttle_ctx_t));
    if (cln == NULL) {
        return NULL;
    }

    ctx = new (cln->data) ngx_http_throttle_ctx_t();
    ctx->request = r;
    ctx->tlcf = tlcf;
    cln->handler = ngx_http_throttle_ctx_marker;

    ngx_http_set_ctx(r->main, ctx, ngx_http_throttle_module);

    return ctx;
}

void
ngx_http_throttle_resume(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_http_request_t *r = ctx->request;
    ngx_connection_t   *c = r->connection;

    ctx->rc = ngx_http_throttle_complete(ctx);
    ctx->waiting = 0;
    ctx->resume = 1;

    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

ngx_int_t
ngx_http_throttle_handler(ngx_http_request_t *r) noexcept
{
    ngx_http_throttle_ctx_t      *ctx;
    ngx_http_throttle_loc_conf_t *tlcf;

    tlcf = (ngx_http_throttle_loc_conf_t *) ngx_http_get_module_loc_conf(
        r, ngx_http_throttle_module);

    if (tlcf->limits == NULL || r != r->main) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_throttle_get_ctx(r);

    if (ctx) {
        if (ctx->waiting) {
            return NGX_AGAIN;
        }

        if (ctx->resume) {
            ctx->resume = 0;
            return ctx->rc;
        }

        return NGX_DECLINED;
    }

    ctx = ngx_http_throttle_create_ctx(r, tlcf);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_start(r, ctx);
}
