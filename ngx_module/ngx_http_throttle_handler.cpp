/*
 * The preaccess-phase handler: one decision per main request, over every
 * "throttle" line of the location at once.
 */

#include "ngx_http_throttle_module.h"

#include "throttle/clock.hpp"

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
    ctx->headers = tlcf->headers;
    cln->handler = ngx_http_throttle_ctx_marker;

    ngx_http_set_ctx(r->main, ctx, ngx_http_throttle_module);

    return ctx;
}

/* Evaluates a line's key and cost; NGX_DECLINED for an empty key. */
static ngx_int_t
ngx_http_throttle_prepare(ngx_http_request_t        *r,
                          ngx_http_throttle_limit_t *limit,
                          ngx_http_throttle_check_t *check) noexcept
{
    ngx_str_t                 key, cost;
    ngx_http_throttle_zone_t *zone;

    zone = (ngx_http_throttle_zone_t *) limit->shm_zone->data;
    check->zone = zone;

    if (ngx_http_complex_value(r, &zone->key, &key) != NGX_OK) {
        return NGX_ERROR;
    }

    if (key.len == 0) {
        return NGX_DECLINED;
    }

    check->key = throttle::ZoneKey(key.data, key.len);
    check->cost = limit->cost_value;

    if (limit->cost == NULL) {
        return NGX_OK;
    }

    if (ngx_http_complex_value(r, limit->cost, &cost) != NGX_OK) {
        return NGX_ERROR;
    }

    auto parsed = throttle::parse_count({(const char *) cost.data, cost.len},
                                        throttle::kMaxCost);

    if (!parsed) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "throttle: cost \"%V\" for zone \"%V\" %s", &cost,
                      &zone->name, parsed.error);
        return NGX_ERROR;
    }

    check->cost = *parsed.value;
    return NGX_OK;
}

/* The zone whose answer the client gets: among rejecting zones the one
 * that asks to wait longest (a cost that never fits, longest of all);
 * when all pass, the one with the fewest units remaining. */
static ngx_http_throttle_check_t *
ngx_http_throttle_binding(ngx_http_throttle_check_t *checks,
                          ngx_uint_t                 n) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *best = NULL;

    auto wait = [](const throttle::ThrottleResult &res) {
        return res.retry_after_us < 0 ? INT64_MAX : res.retry_after_us;
    };

    for (i = 0; i < n; i++) {
        const throttle::ThrottleResult &res = checks[i].decision.result;

        if (checks[i].zone == NULL || checks[i].failed) {
            continue;
        }

        if (best == NULL) {
            best = &checks[i];
            continue;
        }

        const throttle::ThrottleResult &cur = best->decision.result;

        if (res.limited != cur.limited) {
            if (res.limited) {
                best = &checks[i];
            }

        } else if (res.limited ? wait(res) > wait(cur)
                               : res.remaining < cur.remaining) {
            best = &checks[i];
        }
    }

    return best;
}

/*
 * Decides the lines under every zone's lock at once: lines are sorted by
 * zone name, so workers always lock in the same order. Local zones decide;
 * Redis-backed zones ("remote") can only reject here, from their denial
 * cache. Local zones are charged ("commit") only if no zone rejects: a
 * rejection by any zone charges none.
 */
static ngx_int_t
ngx_http_throttle_decide(ngx_http_request_t        *r,
                         ngx_http_throttle_check_t *checks, ngx_uint_t n,
                         bool remote, bool commit, bool *rejected) noexcept
{
    ngx_int_t  rc = NGX_OK;
    ngx_uint_t i;

    auto taking_part = [&](ngx_http_throttle_check_t &check) {
        return check.zone && (remote || !ngx_http_throttle_strict(check.zone));
    };

    *rejected = false;

    for (i = 0; i < n; i++) {
        if (taking_part(checks[i])) {
            ngx_shmtx_lock(&checks[i].zone->shpool->mutex);
        }
    }

    for (i = 0; i < n; i++) {
        if (taking_part(checks[i])) {
            checks[i].now = ngx_http_throttle_now(checks[i].zone);
            ngx_http_throttle_lookup(&checks[i], checks[i].now);
            *rejected = *rejected || checks[i].decision.result.limited;
        }
    }

    if (commit && !*rejected) {
        for (i = 0; i < n && rc == NGX_OK; i++) {
            if (checks[i].zone && !ngx_http_throttle_strict(checks[i].zone)) {
                rc = ngx_http_throttle_reserve(&checks[i], checks[i].now,
                                               r->connection->log);
            }
        }

        for (i = 0; i < n; i++) {
            if (checks[i].zone == NULL
                || ngx_http_throttle_strict(checks[i].zone)) {
                continue;
            }

            if (rc == NGX_OK) {
                ngx_http_throttle_commit(&checks[i], checks[i].now);

            } else {
                ngx_http_throttle_release(&checks[i]);
            }
        }
    }

    for (i = n; i-- > 0; /* void */) {
        if (taking_part(checks[i])) {
            ngx_shmtx_unlock(&checks[i].zone->shpool->mutex);
        }
    }

    return rc;
}

static ngx_int_t
ngx_http_throttle_fail(ngx_http_throttle_loc_conf_t *tlcf,
                       ngx_http_throttle_ctx_t      *ctx) noexcept
{
    ctx->zone = NULL;

    /* dry run never rejects, not even on "throttle_on_error deny" */
    if (tlcf->on_error == NGX_HTTP_THROTTLE_ON_ERROR_ALLOW || tlcf->dry_run) {
        ctx->status = NGX_HTTP_THROTTLE_ERROR_ALLOWED;
        return NGX_DECLINED;
    }

    ctx->status = NGX_HTTP_THROTTLE_ERROR_DENIED;
    return tlcf->status;
}

/* Sets the request's status and binding zone; the phase handler's result. */
static ngx_int_t
ngx_http_throttle_finish(ngx_http_request_t *r, ngx_http_throttle_ctx_t *ctx,
                         bool rejected) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;
    ngx_http_throttle_check_t    *binding;

    binding = ngx_http_throttle_binding(ctx->checks, ctx->nchecks);
    ctx->zone = binding ? binding->zone : NULL;

    if (binding) {
        ctx->result = binding->decision.result;
    }

    if (!rejected) {
        ctx->status = NGX_HTTP_THROTTLE_PASSED;
        return NGX_DECLINED;
    }

    if (ctx->result.retry_after_us < 0) {
        ngx_log_error(tlcf->log_level, r->connection->log, 0,
                      "throttled by zone \"%V\"%s: cost exceeds the "
                      "zone's limit of %L",
                      &ctx->zone->name, tlcf->dry_run ? " (dry run)" : "",
                      ctx->result.limit);
    } else {
        ngx_log_error(tlcf->log_level, r->connection->log, 0,
                      "throttled by zone \"%V\"%s, retry after %L ms",
                      &ctx->zone->name, tlcf->dry_run ? " (dry run)" : "",
                      (ctx->result.retry_after_us + 999) / 1000);
    }

    if (tlcf->dry_run) {
        ctx->status = NGX_HTTP_THROTTLE_REJECTED_DRY_RUN;
        return NGX_DECLINED;
    }

    ctx->status = NGX_HTTP_THROTTLE_REJECTED;
    return tlcf->status;
}

/* All Redis replies are in: settles the charges and decides. */
static ngx_int_t
ngx_http_throttle_complete(ngx_http_request_t      *r,
                           ngx_http_throttle_ctx_t *ctx) noexcept
{
    bool                          rejected = false, failed = false;
    bool                          deny, admitted = false;
    ngx_uint_t                    i;
    ngx_http_throttle_check_t    *check;
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->zone && ngx_http_throttle_strict(check->zone)) {
            failed = failed || check->failed;
            rejected =
                rejected || (!check->failed && check->decision.result.limited);
        }
    }

    deny = failed && tlcf->on_error == NGX_HTTP_THROTTLE_ON_ERROR_DENY
        && !tlcf->dry_run;

    if (!rejected && !deny) {
        /* Redis admitted the request: the local zones have their say, and
         * are charged if they agree */
        if (ngx_http_throttle_decide(r, ctx->checks, ctx->nchecks, false, true,
                                     &rejected)
            != NGX_OK)
        {
            ngx_http_throttle_strict_settle(ctx, false);
            return ngx_http_throttle_fail(tlcf, ctx);
        }

        admitted = !rejected;
    }

    /* refunds what Redis charged for a request that does not go through */
    ngx_http_throttle_strict_settle(ctx, admitted);

    if (failed && !rejected) {
        return ngx_http_throttle_fail(tlcf, ctx);
    }

    return ngx_http_throttle_finish(r, ctx, rejected);
}

void
ngx_http_throttle_resume(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_http_request_t *r = ctx->request;
    ngx_connection_t   *c = r->connection;

    ctx->rc = ngx_http_throttle_complete(r, ctx);
    ctx->waiting = 0;
    ctx->resume = 1;

    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

ngx_int_t
ngx_http_throttle_handler(ngx_http_request_t *r) noexcept
{
    bool                          rejected, remote;
    ngx_int_t                     rc;
    ngx_uint_t                    i, n, active;
    ngx_http_throttle_ctx_t      *ctx;
    ngx_http_throttle_limit_t    *limits;
    ngx_http_throttle_check_t    *checks;
    ngx_http_throttle_loc_conf_t *tlcf;

    tlcf = (ngx_http_throttle_loc_conf_t *) ngx_http_get_module_loc_conf(
        r, ngx_http_throttle_module);

    if (tlcf->limits == NULL || r != r->main) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_throttle_get_ctx(r);

    if (ctx) {
        if (ctx->waiting) {
            return NGX_AGAIN; /* phases re-run while Redis answers */
        }

        if (ctx->resume) {
            ctx->resume = 0;
            return ctx->rc;
        }

        /* decided before an internal redirect: a request counts once */
        return NGX_DECLINED;
    }

    ctx = ngx_http_throttle_create_ctx(r, tlcf);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = tlcf->limits->nelts;
    limits = (ngx_http_throttle_limit_t *) tlcf->limits->elts;

    checks = (ngx_http_throttle_check_t *) ngx_palloc(
        r->pool, n * sizeof(ngx_http_throttle_check_t));
    if (checks == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->request = r;
    ctx->tlcf = tlcf;
    ctx->checks = checks;
    ctx->nchecks = n;

    active = 0;
    remote = false;

    for (i = 0; i < n; i++) {
        new (&checks[i]) ngx_http_throttle_check_t();
        checks[i].ctx = ctx;

        rc = ngx_http_throttle_prepare(r, &limits[i], &checks[i]);

        if (rc == NGX_DECLINED) {
            checks[i].zone = NULL; /* an empty key is not limited */
            continue;
        }

        if (rc != NGX_OK) {
            return ngx_http_throttle_fail(tlcf, ctx);
        }

        active++;
        remote = remote || ngx_http_throttle_strict(checks[i].zone);
    }

    if (active == 0) {
        ctx->status = NGX_HTTP_THROTTLE_PASSED;
        return NGX_DECLINED;
    }

    if (ngx_http_throttle_decide(r, checks, n, true, !remote, &rejected)
        != NGX_OK) {
        return ngx_http_throttle_fail(tlcf, ctx);
    }

    if (rejected || !remote) {
        return ngx_http_throttle_finish(r, ctx, rejected);
    }

    /* strict mode: ask Redis, resume on its replies */
    if (ngx_http_throttle_strict_send(ctx) == 0) {
        return ngx_http_throttle_complete(r, ctx);
    }

    ctx->waiting = 1;
    return NGX_AGAIN;
}
