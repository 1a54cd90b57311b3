/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The glue of the decision about a request, over every "throttle" line of
 * its location at once (or the checks of a throttle_api call), once its
 * checks are made (ngx_http_throttle_start.cpp): it looks the zones up
 * under their locks, charges them, has the strict zones' calls sent
 * (ngx_http_throttle_strict.cpp), tells the core's
 * throttle::RequestDecision each step (the rules are there), and logs and
 * counts the outcome.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_request.h"

#include "throttle/clock.hpp"

using Stage = throttle::RequestDecision::Stage;

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
 * The zones that rejected the request themselves (in a dry run too) count
 * it in their tables of the keys they reject most (throttle_api's top=):
 * under the locks of the pass that decided it (`locked`), or under each
 * zone's own lock for a rejection that came later (Redis's). A request
 * that passes takes no lock for it.
 */
static void
ngx_http_throttle_top_rejected(ngx_http_throttle_ctx_t *ctx,
                               bool                     locked) noexcept
{
    ngx_uint_t                 i;
    throttle::Status           verdict;
    ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        verdict = ctx->decision.verdict(i);

        if (check->lookup.zone == NULL || check->topped
            || (locked && !check->locked)
            || (verdict != throttle::Status::rejected
                && verdict != throttle::Status::rejected_dry_run))
        {
            continue;
        }

        check->topped = 1;

        if (!locked) {
            ngx_shmtx_lock(&check->lookup.zone->shpool->mutex);
        }

        ngx_http_throttle_top_record(&check->lookup);

        if (!locked) {
            ngx_shmtx_unlock(&check->lookup.zone->shpool->mutex);
        }
    }
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

    if (decision.stage() == Stage::decided) {
        ngx_http_throttle_top_rejected(ctx, true);
    }

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
ngx_int_t
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
    ngx_http_throttle_top_rejected(ctx, false);

    if (ngx_http_throttle_hold_places(ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return throttle::turns_away(outcome.status) ? (ngx_int_t) tlcf->status
                                                : NGX_DECLINED;
}

/* Takes the decision as far as it goes without waiting: NGX_AGAIN while
 * Redis answers, else the phase handler's result. */
ngx_int_t
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
        ctx->decision.retry(throttle::monotonic_now_us()
                            - ctx->flight_since_us);
    } else {
        ctx->decision.redis_done();
    }

    return ngx_http_throttle_proceed(ctx);
}
