/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The phase handlers, and how they are entered again.
 *
 * A "throttle" line decides in one of two phases (phase=): preaccess, as
 * limit_req, or once the access phase has let the request in, in nginx's
 * precontent phase (before try_files and the content handler). In each
 * phase a main request is decided once, over every line of that phase in
 * its location (ngx_http_throttle_start.cpp, then
 * ngx_http_throttle_decide.cpp). The decisions live in a context kept in
 * the request's pool, one per phase, and each handler reads its own to know
 * where the request stands each time nginx runs the phases:
 *
 *   - NOT_STARTED: the first time. The decision starts.
 *     Local and async zones, and strict zones' denial caches, decide at
 *     once. If a strict zone must ask Redis, the handler returns NGX_AGAIN,
 *     WAITING: the request waits for the replies, and no worker blocks.
 *     A request whose strict key has another request's script in flight
 *     from this nginx (throttle::Policy::flight_wait_us()) waits too,
 *     WAITING, on a timer of its own that looks at the key again every
 *     millisecond (ngx_http_throttle_flight_wait()), or at once when the
 *     flight was its own worker's and has landed; then the same resume
 *     handler decides it again: from the memory the answer left, or by
 *     Redis. It waits at most its Redis's timeout in all.
 *   - WAITING: nginx ran the phases again before Redis answered, or before
 *     the request's delay passed (a client event, a subrequest): still
 *     NGX_AGAIN.
 *   - RESUMING: every reply is in, or has failed within the backend's
 *     timeout. ngx_http_throttle_resume() completed the decision, kept its
 *     result in ctx->rc and ran the phases again: the handler returns
 *     ctx->rc, once, and the phase is DONE.
 *     A request the decision admitted with a wait (delay=, status DELAYED)
 *     first waits, WAITING still, on a timer of its connection's write
 *     event, as limit_req's delay does: no worker blocks, a client that
 *     goes away is noticed (ngx_http_test_reading() finalizes the
 *     request), and a worker shutting down gracefully waits for the timer.
 *     When it fires, ngx_http_throttle_delayed() makes it RESUMING and runs
 *     the phases again, the same way.
 *   - DONE: decided already, before an internal redirect (which wipes
 *     module contexts: a pool cleanup marks the context so that it can be
 *     found again) or in an earlier pass. NGX_DECLINED: a request counts
 *     once.
 */

#include "ngx_http_throttle_request.h"

/* The phase of the request that waits for its delay to pass. */
static ngx_http_throttle_ctx_t *
ngx_http_throttle_waiting(ngx_http_request_t *r) noexcept
{
    ngx_uint_t                       p;
    ngx_http_throttle_request_ctx_t *rctx = ngx_http_throttle_get_ctx(r);

    for (p = 0; rctx && p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        if (rctx->phases[p].state == NGX_HTTP_THROTTLE_WAITING) {
            return &rctx->phases[p];
        }
    }

    return NULL;
}

/* The write event handler while the request waits: the timer has fired,
 * or the connection became writable before it did. */
static void
ngx_http_throttle_delayed(ngx_http_request_t *r) noexcept
{
    ngx_event_t             *wev = r->connection->write;
    ngx_http_throttle_ctx_t *ctx;

    if (wev->delayed) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;

    ctx = ngx_http_throttle_waiting(r);
    if (ctx) {
        ctx->state = NGX_HTTP_THROTTLE_RESUMING;
    }

    ngx_http_core_run_phases(r);
}

/* Holds a request its phase admitted for its delay_ms, then goes on with
 * ctx->rc: NGX_AGAIN, or an error to finalize the request with. */
static ngx_int_t
ngx_http_throttle_hold(ngx_http_throttle_ctx_t *ctx, ngx_int_t rc) noexcept
{
    ngx_http_request_t *r = ctx->request;
    ngx_connection_t   *c = r->connection;

    /* a close already read must not go unnoticed */
    if (c->read->ready) {
        ngx_post_event(c->read, &ngx_posted_events);

    } else if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_throttle_delayed;

    /* A timer counts from the event loop's cached clock, which a busy
     * worker lets fall behind: brought up to date, the wait counts from
     * now. */
    ngx_time_update();

    c->write->delayed = 1;
    ngx_add_timer(c->write, (ngx_msec_t) ctx->decision.outcome().delay_ms);

    ctx->rc = rc;
    ctx->state = NGX_HTTP_THROTTLE_WAITING;
    return NGX_AGAIN;
}

/* Redis has answered every strict check (or failed within the backend's
 * timeout): the decision completes, and the phases run again. */
static void
ngx_http_throttle_resume(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_int_t           rc;
    ngx_http_request_t *r = ctx->request;
    ngx_connection_t   *c = r->connection;

    rc = ngx_http_throttle_complete(ctx);

    if (rc == NGX_AGAIN) {
        return; /* it waits again: for a flight's answer, or Redis's */
    }

    if (ngx_http_throttle_status(ctx) == throttle::Status::delayed) {
        rc = ngx_http_throttle_hold(ctx, rc);

        if (rc != NGX_AGAIN) {
            ngx_http_finalize_request(r, rc);
        }

    } else {
        ctx->rc = rc;
        ctx->state = NGX_HTTP_THROTTLE_RESUMING;

        ngx_http_core_run_phases(r);
    }

    ngx_http_run_posted_requests(c);
}

static ngx_int_t
ngx_http_throttle_handle(ngx_http_request_t *r, ngx_uint_t phase) noexcept
{
    ngx_int_t                        rc;
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

    switch (ctx->state) {
    case NGX_HTTP_THROTTLE_WAITING:
        return NGX_AGAIN;

    case NGX_HTTP_THROTTLE_RESUMING:
        ctx->state = NGX_HTTP_THROTTLE_DONE;
        return ctx->rc;

    case NGX_HTTP_THROTTLE_DONE:
        return NGX_DECLINED;

    case NGX_HTTP_THROTTLE_NOT_STARTED:
        break;
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
    ctx->state = NGX_HTTP_THROTTLE_DONE;
    ctx->resume_handler = ngx_http_throttle_resume;

    rc = ngx_http_throttle_start(r, ctx);

    return ngx_http_throttle_status(ctx) == throttle::Status::delayed
        ? ngx_http_throttle_hold(ctx, rc)
        : rc;
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
