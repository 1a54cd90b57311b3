/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The decision about a request, over every "throttle" line of its location
 * at once: all must pass, and a request rejected by one zone is charged to
 * none. Local and async zones decide here; strict zones decide here only
 * what their denial cache rejects, and otherwise ask Redis
 * (ngx_http_throttle_strict.cpp), after which the decision completes.
 */

#include "ngx_http_throttle_metrics.h"
#include "ngx_http_throttle_module.h"

#include <new>

/* Which zones a pass over a request's lines decides. */
typedef enum {
    /* every zone, strict ones from their denial cache; the local and async
     * ones are charged only if no strict zone has to ask Redis */
    NGX_HTTP_THROTTLE_BEFORE_REDIS,
    /* Redis admitted the request: the zones it did not decide, charged if
     * they agree */
    NGX_HTTP_THROTTLE_AFTER_REDIS
} ngx_http_throttle_pass_e;

/* A zone's check of a key, evaluated from a line or given as it is
 * (throttle_api): the same bytes are the same key in the zone, so HTTP
 * requests and API checks of a key share its budget. */
static void
ngx_http_throttle_set_key(ngx_http_throttle_check_t *check,
                          ngx_http_throttle_zone_t *zone, const ngx_str_t *key,
                          int64_t cost, int64_t delay) noexcept
{
    check->zone = zone;
    check->key = throttle::ZoneKey(key->data, key->len);
    check->cost = cost;
    check->delay = delay;
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

    ngx_http_throttle_set_key(check, zone, &key, limit->cost_value,
                              limit->delay);

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

/* How long a result asks to wait: a cost that never fits, longest of
 * all. */
static int64_t
ngx_http_throttle_wait(const throttle::ThrottleResult &res) noexcept
{
    return res.retry_after_us < 0 ? INT64_MAX : res.retry_after_us;
}

/* Whether the client should rather get answer "res" than "cur": a
 * rejection over a pass, among rejections the one that asks to wait
 * longest, among passes the one with the fewest units remaining. */
static bool
ngx_http_throttle_binds_before(const throttle::ThrottleResult &res,
                               const throttle::ThrottleResult &cur) noexcept
{
    if (res.limited != cur.limited) {
        return res.limited;
    }

    return res.limited
        ? ngx_http_throttle_wait(res) > ngx_http_throttle_wait(cur)
        : res.remaining < cur.remaining;
}

/* The zone whose answer the client gets. */
static ngx_http_throttle_check_t *
ngx_http_throttle_binding(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check, *best = NULL;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->zone == NULL || check->failed) {
            continue;
        }

        if (best == NULL
            || ngx_http_throttle_binds_before(check->decision.result,
                                              best->decision.result))
        {
            best = check;
        }
    }

    return best;
}

/*
 * The phase whose answer the client gets, in headers and variables, when
 * both decided: the one that turned the request away, or would have in a
 * dry run, or failed; when both let it through, the binding one of their
 * zones. A throttle_api location's decision comes before either. NULL if
 * nothing decided.
 */
const ngx_http_throttle_ctx_t *
ngx_http_throttle_answer(ngx_http_request_t *r) noexcept
{
    ngx_uint_t                       p;
    const ngx_http_throttle_ctx_t   *ctx, *best = NULL;
    ngx_http_throttle_request_ctx_t *rctx = ngx_http_throttle_get_ctx(r);

    /* by ngx_http_throttle_status_e: how much each status says. A phase
     * that failed says more than one that only held the request back. */
    static const u_char weight[] = {0, 1, 7, 5, 4, 6, 3, 2};

    if (rctx == NULL) {
        return NULL;
    }

    /* the response of a throttle_api location is its answer to the
     * caller's checks */
    if (rctx->api.status != NGX_HTTP_THROTTLE_NONE) {
        return &rctx->api;
    }

    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        ctx = &rctx->phases[p];

        if (ctx->status == NGX_HTTP_THROTTLE_NONE) {
            continue;
        }

        if (best == NULL || weight[ctx->status] > weight[best->status]
            || (weight[ctx->status] == weight[best->status] && ctx->zone
                && (best->zone == NULL
                    || ngx_http_throttle_binds_before(ctx->result,
                                                      best->result))))
        {
            best = ctx;
        }
    }

    return best;
}

static bool
ngx_http_throttle_takes_part(const ngx_http_throttle_check_t *check,
                             ngx_http_throttle_pass_e         pass) noexcept
{
    return check->zone
        && (pass == NGX_HTTP_THROTTLE_BEFORE_REDIS
            || !ngx_http_throttle_strict(check->zone));
}

/* Under every zone's lock: reserves what the charges need, then commits
 * them all, or none if a zone is full. */
static ngx_int_t
ngx_http_throttle_charge(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_int_t                  rc = NGX_OK;
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;
    ngx_log_t                 *log = ctx->request->connection->log;

    for (i = 0; i < ctx->nchecks && rc == NGX_OK; i++) {
        check = &ctx->checks[i];
        if (ngx_http_throttle_takes_part(check, NGX_HTTP_THROTTLE_AFTER_REDIS))
        {
            rc = ngx_http_throttle_reserve(check, log);
        }
    }

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        if (!ngx_http_throttle_takes_part(check, NGX_HTTP_THROTTLE_AFTER_REDIS))
        {
            continue;
        }

        if (rc == NGX_OK) {
            ngx_http_throttle_commit(check);
            check->charged = 1;

        } else {
            ngx_http_throttle_release(check);
        }
    }

    return rc;
}

/*
 * Decides the lines that take part in this pass under every zone's lock at
 * once: lines are sorted by zone name, so workers always lock in the same
 * order.
 */
static ngx_int_t
ngx_http_throttle_decide(ngx_http_throttle_ctx_t *ctx,
                         ngx_http_throttle_pass_e pass, bool *rejected) noexcept
{
    ngx_int_t                  rc = NGX_OK;
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;

    *rejected = false;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        if (ngx_http_throttle_takes_part(check, pass)) {
            ngx_shmtx_lock(&check->zone->shpool->mutex);
        }
    }

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        if (ngx_http_throttle_takes_part(check, pass)) {
            check->now = check->zone->policy.now_us();
            ngx_http_throttle_lookup(check);
            *rejected = *rejected || check->decision.result.limited;
        }
    }

    if (!*rejected && (pass == NGX_HTTP_THROTTLE_AFTER_REDIS || !ctx->strict)) {
        rc = ngx_http_throttle_charge(ctx);
    }

    for (i = ctx->nchecks; i-- > 0; /* void */) {
        check = &ctx->checks[i];
        if (ngx_http_throttle_takes_part(check, pass)) {
            ngx_shmtx_unlock(&check->zone->shpool->mutex);
        }
    }

    return rc;
}

/* The phase's outcome, as $throttle_status says it, counted in each zone
 * that took part. */
static void
ngx_http_throttle_conclude(ngx_http_throttle_ctx_t *ctx,
                           ngx_uint_t               status) noexcept
{
    ctx->status = status;
    ngx_http_throttle_metrics_decided(ctx);
}

ngx_int_t
ngx_http_throttle_fail(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;

    ctx->zone = NULL;

    /* dry run never rejects, not even on "throttle_on_error deny" */
    if (tlcf->on_error == NGX_HTTP_THROTTLE_ON_ERROR_ALLOW || tlcf->dry_run) {
        ngx_http_throttle_conclude(ctx, NGX_HTTP_THROTTLE_ERROR_ALLOWED);
        return NGX_DECLINED;
    }

    ngx_http_throttle_conclude(ctx, NGX_HTTP_THROTTLE_ERROR_DENIED);
    return tlcf->status;
}

/*
 * How long each zone that admitted the request would hold it back (its
 * line's delay=), in check->wait; returns the zone that would hold it
 * longest, or NULL if none would.
 */
static ngx_http_throttle_check_t *
ngx_http_throttle_waits(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check, *longest = NULL;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->zone == NULL || check->failed) {
            continue;
        }

        check->wait = check->zone->policy.delay_us(check->decision.result,
                                                   check->cost, check->delay);

        if (check->wait > 0 && (longest == NULL || check->wait > longest->wait))
        {
            longest = check;
        }
    }

    return longest;
}

/* The request passed: PASSED, or DELAYED (DELAYED_DRY_RUN) by the longest
 * wait among its zones. */
static ngx_int_t
ngx_http_throttle_pass(ngx_http_throttle_ctx_t   *ctx,
                       ngx_http_throttle_check_t *longest) noexcept
{
    ngx_uint_t                    level;
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;

    if (longest == NULL) {
        ngx_http_throttle_conclude(ctx, NGX_HTTP_THROTTLE_PASSED);
        return NGX_DECLINED;
    }

    /* whole milliseconds (nginx's timers), rounded up */
    ctx->delay = (ngx_msec_t) throttle::ceil_millis(longest->wait);

    /* as limit_req: a level below that of rejections */
    level =
        tlcf->log_level == NGX_LOG_INFO ? NGX_LOG_INFO : tlcf->log_level + 1;
    ngx_log_error(level, ctx->request->connection->log, 0,
                  "delaying request by %M ms by zone \"%V\"%s", ctx->delay,
                  &longest->zone->name, tlcf->dry_run ? " (dry run)" : "");

    ngx_http_throttle_conclude(ctx,
                               tlcf->dry_run ? NGX_HTTP_THROTTLE_DELAYED_DRY_RUN
                                             : NGX_HTTP_THROTTLE_DELAYED);
    return NGX_DECLINED;
}

/* Sets the request's status and binding zone; the phase handler's result. */
static ngx_int_t
ngx_http_throttle_finish(ngx_http_throttle_ctx_t *ctx, bool rejected) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;
    ngx_http_throttle_check_t    *binding, *longest;
    ngx_log_t                    *log = ctx->request->connection->log;
    const char                   *dry_run = tlcf->dry_run ? " (dry run)" : "";

    binding = ngx_http_throttle_binding(ctx);
    ctx->zone = binding ? binding->zone : NULL;

    if (binding) {
        ctx->result = binding->decision.result;
    }

    /* every zone's, for its own verdict (ngx_http_throttle_metrics.h) */
    longest = ngx_http_throttle_waits(ctx);

    if (!rejected) {
        return ngx_http_throttle_pass(ctx, longest);
    }

    if (ctx->result.retry_after_us < 0) {
        ngx_log_error(tlcf->log_level, log, 0,
                      "throttled by zone \"%V\"%s: cost exceeds the zone's "
                      "limit of %L",
                      &ctx->zone->name, dry_run, ctx->result.limit);
    } else {
        ngx_log_error(tlcf->log_level, log, 0,
                      "throttled by zone \"%V\"%s, retry after %L ms",
                      &ctx->zone->name, dry_run,
                      (ctx->result.retry_after_us + 999) / 1000);
    }

    if (tlcf->dry_run) {
        ngx_http_throttle_conclude(ctx, NGX_HTTP_THROTTLE_REJECTED_DRY_RUN);
        return NGX_DECLINED;
    }

    ngx_http_throttle_conclude(ctx, NGX_HTTP_THROTTLE_REJECTED);
    return tlcf->status;
}

/* Every Redis reply is in (or has failed): settles the charges and
 * decides. */
ngx_int_t
ngx_http_throttle_complete(ngx_http_throttle_ctx_t *ctx) noexcept
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
        if (ngx_http_throttle_decide(ctx, NGX_HTTP_THROTTLE_AFTER_REDIS,
                                     &rejected)
            != NGX_OK)
        {
            ngx_http_throttle_strict_settle(ctx, false);
            return ngx_http_throttle_fail(ctx);
        }

        admitted = !rejected;
    }

    /* refunds what Redis charged for a request that does not go through */
    ngx_http_throttle_strict_settle(ctx, admitted);

    if (failed && !rejected) {
        return ngx_http_throttle_fail(ctx);
    }

    return ngx_http_throttle_finish(ctx, rejected);
}

/* ctx->checks: "n" checks of no zone yet. */
static ngx_int_t
ngx_http_throttle_make_checks(ngx_http_request_t      *r,
                              ngx_http_throttle_ctx_t *ctx,
                              ngx_uint_t               n) noexcept
{
    ngx_uint_t i;

    ctx->checks = (ngx_http_throttle_check_t *) ngx_palloc(
        r->pool, n * sizeof(ngx_http_throttle_check_t));
    if (ctx->checks == NULL) {
        return NGX_ERROR;
    }

    ctx->nchecks = n;

    /* all of them, before any may fail: a failure counts the lines
     * evaluated so far (ngx_http_throttle_fail()) */
    for (i = 0; i < n; i++) {
        new (&ctx->checks[i]) ngx_http_throttle_check_t();
        ctx->checks[i].ctx = ctx;
    }

    return NGX_OK;
}

/* Evaluates every line's key and cost into ctx->checks. */
static ngx_int_t
ngx_http_throttle_prepare_all(ngx_http_request_t      *r,
                              ngx_http_throttle_ctx_t *ctx,
                              ngx_uint_t              *active) noexcept
{
    ngx_int_t                  rc;
    ngx_array_t               *lines = ctx->tlcf->limits[ctx->phase];
    ngx_uint_t                 i, n = lines->nelts;
    ngx_http_throttle_limit_t *limits;

    limits = (ngx_http_throttle_limit_t *) lines->elts;
    *active = 0;

    if (ngx_http_throttle_make_checks(r, ctx, n) != NGX_OK) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        ngx_http_throttle_check_t *check = &ctx->checks[i];

        rc = ngx_http_throttle_prepare(r, &limits[i], check);

        if (rc == NGX_DECLINED) {
            check->zone = NULL; /* an empty key is not limited */
            continue;
        }

        if (rc != NGX_OK) {
            return rc;
        }

        (*active)++;
        ctx->strict = ctx->strict || ngx_http_throttle_strict(check->zone);
    }

    return NGX_OK;
}

/* Decides the prepared checks, "active" of which have a key. */
static ngx_int_t
ngx_http_throttle_run(ngx_http_throttle_ctx_t *ctx, ngx_uint_t active) noexcept
{
    bool rejected;

    if (active == 0) {
        ctx->status = NGX_HTTP_THROTTLE_PASSED;
        return NGX_DECLINED;
    }

    if (ngx_http_throttle_decide(ctx, NGX_HTTP_THROTTLE_BEFORE_REDIS, &rejected)
        != NGX_OK)
    {
        return ngx_http_throttle_fail(ctx);
    }

    if (rejected && ctx->strict) {
        ngx_http_throttle_metrics_denials(ctx);
    }

    if (rejected || !ctx->strict) {
        return ngx_http_throttle_finish(ctx, rejected);
    }

    /* strict mode: ask Redis, resume on its replies */
    if (ngx_http_throttle_strict_send(ctx) == 0) {
        return ngx_http_throttle_complete(ctx);
    }

    ctx->waiting = 1;
    return NGX_AGAIN;
}

ngx_int_t
ngx_http_throttle_start(ngx_http_request_t      *r,
                        ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t active;

    if (ngx_http_throttle_prepare_all(r, ctx, &active) != NGX_OK) {
        return ctx->checks ? ngx_http_throttle_fail(ctx)
                           : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_run(ctx, active);
}

/* Where a given check goes among the others: in the order of the zones'
 * names, as a location's lines are, so that a request locks its zones in
 * the same order as every other. */
static ngx_uint_t
ngx_http_throttle_given_rank(const ngx_http_throttle_given_t *given,
                             ngx_uint_t n, ngx_uint_t which) noexcept
{
    ngx_uint_t       i, rank = 0;
    const ngx_str_t *name = &given[which].zone->name;

    for (i = 0; i < n; i++) {
        const ngx_str_t *other = &given[i].zone->name;

        if (ngx_memn2cmp(other->data, name->data, other->len, name->len) < 0) {
            rank++;
        }
    }

    return rank;
}

/*
 * The decision about checks given as they are (throttle_api) rather than
 * evaluated from a location's lines: each a zone, at most once, and a key
 * that is not empty. Decided as a location's lines are: all must pass, and
 * a rejected set is charged to none.
 */
ngx_int_t
ngx_http_throttle_start_given(ngx_http_request_t              *r,
                              ngx_http_throttle_ctx_t         *ctx,
                              const ngx_http_throttle_given_t *given,
                              ngx_uint_t                       n) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;

    if (ngx_http_throttle_make_checks(r, ctx, n) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < n; i++) {
        check = &ctx->checks[ngx_http_throttle_given_rank(given, n, i)];
        ngx_http_throttle_set_key(check, given[i].zone, &given[i].key,
                                  given[i].cost, given[i].delay);
        ctx->strict = ctx->strict || ngx_http_throttle_strict(check->zone);
    }

    return ngx_http_throttle_run(ctx, n);
}
