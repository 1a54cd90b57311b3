/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The glue of the decision about a request, over every "throttle" line of
 * its location at once (or the checks of a throttle_api call): it
 * evaluates the lines, looks the zones up under their locks, charges them,
 * has the strict zones' calls sent (ngx_http_throttle_strict.cpp), and
 * tells the core's throttle::RequestDecision each step; the rules are
 * there.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_request.h"

#include <new>

using Stage = throttle::RequestDecision::Stage;

/* A zone's check of a key, evaluated from a line or given as it is
 * (throttle_api): the same bytes are the same key in the zone, so HTTP
 * requests and API checks of a key share its budget. */
static void
ngx_http_throttle_set_key(ngx_http_throttle_check_t *check,
                          ngx_http_throttle_zone_t *zone, const ngx_str_t *key,
                          int64_t cost, int64_t delay_units) noexcept
{
    check->lookup.zone = zone;
    check->lookup.key = throttle::ZoneKey(key->data, key->len);
    check->lookup.part->policy = &zone->policy;
    check->lookup.part->cost = cost;
    check->lookup.part->delay_units = delay_units;
    /* how long it may wait for its key's flight, in all */
    check->lookup.part->flight_budget_us = ngx_http_throttle_strict(zone)
        ? (int64_t) zone->redis->timeout * 1000
        : 0;
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
    check->lookup.zone = zone;
    check->settle = limit->settle;

    if (ngx_http_complex_value(r, &zone->key, &key) != NGX_OK) {
        return NGX_ERROR;
    }

    if (key.len == 0) {
        return NGX_DECLINED;
    }

    ngx_http_throttle_set_key(check, zone, &key, limit->cost_value,
                              limit->delay_units);

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

    check->lookup.part->cost = *parsed.value;
    return NGX_OK;
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
        if (ctx->decision.takes_part(i)) {
            rc = ngx_http_throttle_reserve(&ctx->checks[i].lookup, log);
        }
    }

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (!ctx->decision.takes_part(i)) {
            continue;
        }

        if (rc == NGX_OK) {
            ngx_http_throttle_commit(&check->lookup);
        } else {
            ngx_http_throttle_release(&check->lookup);
        }
    }

    return rc;
}

/*
 * The zones that decide in this stage of the decision, under every zone's
 * lock at once: lines are sorted by zone name, so workers always lock in
 * the same order. A request that asks Redis takes its keys' flights under
 * the same locks, so that no other request of this nginx finds the keys
 * free meanwhile.
 */
static void
ngx_http_throttle_decide_zones(ngx_http_throttle_ctx_t *ctx) noexcept
{
    bool                       room = true;
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;
    throttle::RequestDecision &decision = ctx->decision;

    for (i = 0; i < ctx->nchecks; i++) {
        ctx->checks[i].locked = decision.takes_part(i);
        if (ctx->checks[i].locked) {
            ngx_shmtx_lock(&ctx->checks[i].lookup.zone->shpool->mutex);
        }
    }

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        if (check->locked) {
            check->lookup.now = check->lookup.zone->policy.now_us();
            ngx_http_throttle_lookup(&check->lookup);
        }
    }

    if (decision.charges()) {
        room = ngx_http_throttle_charge(ctx) == NGX_OK;
    }

    decision.end_pass(room);

    if (decision.stage() == Stage::redis) {
        ngx_http_throttle_flight_take(ctx);
    }

    for (i = ctx->nchecks; i-- > 0; /* void */) {
        if (ctx->checks[i].locked) {
            ngx_shmtx_unlock(&ctx->checks[i].lookup.zone->shpool->mutex);
        }
    }
}

/*
 * A phase has decided a request: each zone that took part (its key was
 * not empty) counts it once, by its own verdict
 * (throttle::RequestDecision::verdict()); a zone counts the units it
 * charged, and those it refused when it rejected the request itself.
 */
static void
ngx_http_throttle_metrics_decided(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                   i;
    ngx_http_throttle_metrics_t *m;
    throttle::Status             verdict;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->checks[i].lookup.zone == NULL) {
            continue;
        }

        const throttle::ZoneCheck &part = ctx->decision.check(i);

        m = &ctx->checks[i].lookup.zone->sh->metrics;
        verdict = ctx->decision.verdict(i);
        ngx_http_throttle_metrics_add(&m->requests[(size_t) verdict], 1);

        if (part.charged) {
            ngx_http_throttle_metrics_add(&m->units_passed, part.cost);

        } else if (verdict == throttle::Status::rejected
                   || verdict == throttle::Status::rejected_dry_run)
        {
            ngx_http_throttle_metrics_add(&m->units_rejected, part.cost);
        }
    }
}

/* The strict zones that rejected a request from their memory of Redis's
 * rejections, without asking Redis. */
static void
ngx_http_throttle_metrics_denials(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->decision.denied_from_memory(i)) {
            ngx_http_throttle_metrics_add(
                &ctx->checks[i].lookup.zone->sh->metrics.denial_cache_hits, 1);
        }
    }
}

/* The request is decided: logged as limit_req logs, counted in each zone,
 * and the phase handler's result. */
static ngx_int_t
ngx_http_throttle_conclude(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_http_throttle_loc_conf_t   *tlcf = ctx->tlcf;
    ngx_log_t                      *log = ctx->request->connection->log;
    const throttle::Outcome        &outcome = ctx->decision.outcome();
    const throttle::ThrottleResult &res = outcome.result;
    const char                     *dry_run = tlcf->dry_run ? " (dry run)" : "";
    ngx_uint_t                      level;

    switch (outcome.status) {
    case throttle::Status::delayed:
    case throttle::Status::delayed_dry_run:
        /* as limit_req: a level below that of rejections */
        level = tlcf->log_level == NGX_LOG_INFO ? NGX_LOG_INFO
                                                : tlcf->log_level + 1;
        ngx_log_error(level, log, 0,
                      "delaying request by %L ms by zone \"%V\"%s",
                      outcome.delay_ms,
                      &ctx->checks[outcome.longest].lookup.zone->name, dry_run);
        break;

    case throttle::Status::rejected:
    case throttle::Status::rejected_dry_run:
        if (res.retry_after_us < 0) {
            ngx_log_error(tlcf->log_level, log, 0,
                          "throttled by zone \"%V\"%s: cost exceeds the "
                          "zone's limit of %L",
                          &ngx_http_throttle_binding(ctx)->name, dry_run,
                          res.limit);
        } else {
            ngx_log_error(tlcf->log_level, log, 0,
                          "throttled by zone \"%V\"%s, retry after %L ms",
                          &ngx_http_throttle_binding(ctx)->name, dry_run,
                          throttle::ceil_millis(res.retry_after_us));
        }
        break;

    default:
        break;
    }

    ngx_http_throttle_metrics_decided(ctx);

    if (ngx_http_throttle_hold_places(ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return throttle::turns_away(outcome.status) ? (ngx_int_t) tlcf->status
                                                : NGX_DECLINED;
}

/* Takes the decision as far as it goes without waiting: NGX_AGAIN while
 * Redis answers, else the phase handler's result. */
static ngx_int_t
ngx_http_throttle_proceed(ngx_http_throttle_ctx_t *ctx) noexcept
{
    throttle::RequestDecision &decision = ctx->decision;

    if (decision.stage() == Stage::zones) {
        ngx_http_throttle_decide_zones(ctx);
        ngx_http_throttle_metrics_denials(ctx);
    }

    if (decision.stage() == Stage::flight) {
        return ngx_http_throttle_flight_wait(ctx);
    }

    if (decision.stage() == Stage::redis) {
        if (ngx_http_throttle_strict_send(ctx) != 0) {
            ctx->state = NGX_HTTP_THROTTLE_WAITING;
            return NGX_AGAIN;
        }

        decision.redis_done();
    }

    if (decision.stage() == Stage::zones_after_redis) {
        ngx_http_throttle_decide_zones(ctx);
    }

    /* what Redis answered: learned, or given back */
    ngx_http_throttle_strict_follow_up(ctx);

    return ngx_http_throttle_conclude(ctx);
}

/* Every Redis reply is in (or has failed), or it is time to look at the
 * flights waited for again: the decision goes on (NGX_AGAIN if it waits
 * again). */
ngx_int_t
ngx_http_throttle_complete(ngx_http_throttle_ctx_t *ctx) noexcept
{
    if (ctx->decision.stage() == Stage::flight) {
        ctx->decision.retry((int64_t) (ngx_current_msec - ctx->flight_since)
                            * 1000);
    } else {
        ctx->decision.redis_done();
    }

    return ngx_http_throttle_proceed(ctx);
}

/* ctx->checks: "n" checks of no zone yet, each with its part in the
 * decision. */
static ngx_int_t
ngx_http_throttle_make_checks(ngx_http_request_t      *r,
                              ngx_http_throttle_ctx_t *ctx,
                              ngx_uint_t               n) noexcept
{
    ngx_uint_t           i;
    throttle::ZoneCheck *parts;

    ctx->checks = (ngx_http_throttle_check_t *) ngx_palloc(
        r->pool, n * sizeof(ngx_http_throttle_check_t));
    parts = (throttle::ZoneCheck *) ngx_palloc(r->pool,
                                               n * sizeof(throttle::ZoneCheck));
    if (ctx->checks == NULL || parts == NULL) {
        return NGX_ERROR;
    }

    ctx->nchecks = n;

    for (i = 0; i < n; i++) {
        new (&ctx->checks[i]) ngx_http_throttle_check_t();
        ctx->checks[i].ctx = ctx;
        ctx->checks[i].lookup.part = new (&parts[i]) throttle::ZoneCheck();
    }

    return NGX_OK;
}

/* The decision starts over the checks as they are now: their parts are in
 * one array, the first check's part first. */
static void
ngx_http_throttle_begin(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;

    ctx->decision.begin(
        {tlcf->dry_run != 0, tlcf->on_error == NGX_HTTP_THROTTLE_ON_ERROR_DENY},
        ctx->nchecks ? ctx->checks[0].lookup.part : NULL, ctx->nchecks);
}

/* Evaluates every line's key and cost into ctx->checks. */
static ngx_int_t
ngx_http_throttle_prepare_all(ngx_http_request_t      *r,
                              ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_int_t                  rc;
    ngx_array_t               *lines = ctx->tlcf->limits[ctx->phase];
    ngx_uint_t                 i;
    ngx_http_throttle_limit_t *limits;

    limits = (ngx_http_throttle_limit_t *) lines->elts;

    for (i = 0; i < ctx->nchecks; i++) {
        rc = ngx_http_throttle_prepare(r, &limits[i], &ctx->checks[i]);

        if (rc == NGX_DECLINED) {
            ctx->checks[i].lookup.zone = NULL; /* an empty key is not limited */
            continue;
        }

        if (rc != NGX_OK) {
            return rc;
        }
    }

    return NGX_OK;
}

ngx_int_t
ngx_http_throttle_start(ngx_http_request_t      *r,
                        ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_int_t rc;

    if (ngx_http_throttle_make_checks(r, ctx,
                                      ctx->tlcf->limits[ctx->phase]->nelts)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_throttle_prepare_all(r, ctx);
    ngx_http_throttle_begin(ctx);

    if (rc != NGX_OK) {
        /* counted in the zones of the lines evaluated so far */
        ctx->decision.cannot_decide();
        return ngx_http_throttle_conclude(ctx);
    }

    return ngx_http_throttle_proceed(ctx);
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
                                  given[i].cost, given[i].delay_units);
    }

    ngx_http_throttle_begin(ctx);
    return ngx_http_throttle_proceed(ctx);
}
