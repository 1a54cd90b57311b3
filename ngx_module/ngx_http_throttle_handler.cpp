/*
 * The phase handlers, and how they are entered again.
 *
 * A "throttle" line decides in one of two phases (phase=): preaccess, as
 * limit_req, or once the access phase has let the request in, in nginx's
 * precontent phase (before try_files and the content handler). In each
 * phase a main request is decided once, over every line of that phase in
 * its location (ngx_http_throttle_decide.cpp). The decisions live in a
 * context kept in the request's pool, one per phase, and each handler
 * reads its own to know where the request stands each time nginx runs the
 * phases:
 *
 *   - not started: the first time. The decision starts.
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

static ngx_int_t
ngx_http_throttle_handle(ngx_http_request_t *r, ngx_uint_t phase) noexcept
{
    ngx_http_throttle_ctx_t         *ctx;
    ngx_http_throttle_loc_conf_t    *tlcf;
    ngx_http_throttle_request_ctx_t *rctx;

    tlcf = (ngx_http_throttle_loc_conf_t *) ngx_http_get_module_loc_conf(
        r, ngx_http_throttle_module);

    if (tlcf->limits[phase] == NULL || r != r->main) {
        return NGX_DECLINED;
    }

    rctx = ngx_http_throttle_get_ctx(r);

    if (rctx == NULL) {
        rctx = ngx_http_throttle_create_ctx(r);
        if (rctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    ctx = &rctx->phases[phase];

    if (ctx->started) {
        if (ctx->waiting) {
            return NGX_AGAIN;
        }

        if (ctx->resume) {
            ctx->resume = 0;
            return ctx->rc;
        }

        return NGX_DECLINED;
    }

    /* A request on its way to an error page was refused (by the access
     * phase, or a zone) or failed before it got here: the authorized phase
     * does not count it as one that was let in. */
    if (phase == NGX_HTTP_THROTTLE_AUTHORIZED && r->error_page) {
        return NGX_DECLINED;
    }

    ctx->phase = phase;
    ctx->request = r;
    ctx->tlcf = tlcf;
    ctx->started = 1;

    return ngx_http_throttle_start(r, ctx);
}

ngx_int_t
ngx_http_throttle_preaccess_handler(ngx_http_request_t *r) noexcept
{
    return ngx_http_throttle_handle(r, NGX_HTTP_THROTTLE_PREACCESS);
}

ngx_int_t
ngx_http_throttle_authorized_handler(ngx_http_request_t *r) noexcept
{
    return ngx_http_throttle_handle(r, NGX_HTTP_THROTTLE_AUTHORIZED);
}
