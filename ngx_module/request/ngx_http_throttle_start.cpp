/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The start of the decision about a request: its location's "throttle"
 * lines evaluated (key, cost, the zone's plan) into one check each, or the
 * checks of a throttle_api call taken as they are; then the decision
 * (ngx_http_throttle_decide.cpp) goes as far as it can.
 */

#include "ngx_http_throttle_request.h"

#include <new>

/* A zone's check of a key, evaluated from a line or given as it is
 * (throttle_api): the same bytes are the same key in the zone, so HTTP
 * requests and API checks of a key share its budget. NGX_ERROR if the
 * zone's rate= or burst= is a variable whose value makes no plan (logged):
 * the request gets throttle_on_error's answer. */
static ngx_int_t
ngx_http_throttle_set_key(ngx_http_request_t        *r,
                          ngx_http_throttle_check_t *check,
                          ngx_http_throttle_zone_t *zone, const ngx_str_t *key,
                          int64_t cost, int64_t delay_units) noexcept
{
    check->lookup.zone = zone;
    check->lookup.key = throttle::ZoneKey(key->data, key->len);
    check->lookup.policy = ngx_http_throttle_plan(r, zone, &check->plan);
    if (check->lookup.policy == NULL) {
        return NGX_ERROR;
    }

    check->lookup.part->policy = check->lookup.policy;
    check->lookup.part->cost = cost;
    check->lookup.part->delay_units = delay_units;
    /* how long it may wait for its key's flight, in all */
    check->lookup.part->flight_budget_us = ngx_http_throttle_strict(zone)
        ? (int64_t) zone->redis->timeout * 1000
        : 0;

    return NGX_OK;
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

    if (ngx_http_throttle_value(r, zone->key, &key) != NGX_OK) {
        return NGX_ERROR;
    }

    if (key.len == 0) {
        return NGX_DECLINED;
    }

    if (ngx_http_throttle_set_key(r, check, zone, &key, limit->cost_value,
                                  limit->delay_units)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (limit->cost == NULL) {
        return NGX_OK;
    }

    if (ngx_http_throttle_value(r, limit->cost, &cost) != NGX_OK) {
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
    ngx_int_t                  rc = NGX_OK;
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;

    if (ngx_http_throttle_make_checks(r, ctx, n) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < n; i++) {
        check = &ctx->checks[ngx_http_throttle_given_rank(given, n, i)];
        if (ngx_http_throttle_set_key(r, check, given[i].zone, &given[i].key,
                                      given[i].cost, given[i].delay_units)
            != NGX_OK)
        {
            rc = NGX_ERROR;
        }
    }

    ngx_http_throttle_begin(ctx);

    if (rc != NGX_OK) {
        ctx->decision.cannot_decide();
        return ngx_http_throttle_conclude(ctx);
    }

    return ngx_http_throttle_proceed(ctx);
}
