/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Recording the figures throttle_metrics reports (ngx_http_throttle_metrics.cpp
 * writes them out): each helper adds what one event of a zone means to the
 * zone's ngx_http_throttle_metrics_t, in its shared memory. Counters are
 * atomic adds, safe without the zone's lock; the helpers that say "under
 * the zone's lock" write gauges that the lock keeps consistent.
 */

#ifndef NGX_HTTP_THROTTLE_METRICS_H
#define NGX_HTTP_THROTTLE_METRICS_H

#include "ngx_http_throttle_counter.h"
#include "ngx_http_throttle_module.h"

/*
 * What one zone said of a request its phase decided: rejected (or
 * rejected_dry_run) if it refused it itself, whatever the others said;
 * else the phase's throttle_on_error outcome if the phase fell to it, or if
 * this zone's Redis failed; else delayed (or delayed_dry_run) if its own
 * line would hold the request back, passed if not, even when another zone
 * refused the request. So a zone's "rejected" are the requests it refused,
 * its "delayed" those it held back.
 */
static inline ngx_uint_t
ngx_http_throttle_metrics_verdict(
    const ngx_http_throttle_ctx_t   *ctx,
    const ngx_http_throttle_check_t *check) noexcept
{
    const ngx_http_throttle_loc_conf_t *tlcf = ctx->tlcf;

    if (!check->failed && check->decision.result.limited) {
        return tlcf->dry_run ? NGX_HTTP_THROTTLE_REJECTED_DRY_RUN
                             : NGX_HTTP_THROTTLE_REJECTED;
    }

    if (ctx->status == NGX_HTTP_THROTTLE_ERROR_ALLOWED
        || ctx->status == NGX_HTTP_THROTTLE_ERROR_DENIED)
    {
        return ctx->status;
    }

    if (check->failed) {
        /* another zone refused the request first */
        return tlcf->on_error == NGX_HTTP_THROTTLE_ON_ERROR_DENY
                && !tlcf->dry_run
            ? NGX_HTTP_THROTTLE_ERROR_DENIED
            : NGX_HTTP_THROTTLE_ERROR_ALLOWED;
    }

    if (check->wait > 0) {
        return tlcf->dry_run ? NGX_HTTP_THROTTLE_DELAYED_DRY_RUN
                             : NGX_HTTP_THROTTLE_DELAYED;
    }

    return NGX_HTTP_THROTTLE_PASSED;
}

/*
 * A phase has decided a request: each zone that took part (its key was
 * not empty) counts it once, by its own verdict; a zone counts the units
 * it charged, and those it refused when it rejected the request itself.
 */
static inline void
ngx_http_throttle_metrics_decided(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                       i;
    ngx_http_throttle_metrics_t     *m;
    const ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->zone == NULL) {
            continue;
        }

        m = &check->zone->sh->metrics;
        ngx_http_throttle_metrics_add(
            &m->requests[ngx_http_throttle_metrics_verdict(ctx, check)], 1);

        if (check->charged) {
            ngx_http_throttle_metrics_add(&m->units_passed, check->cost);

        } else if (!check->failed && check->decision.result.limited) {
            ngx_http_throttle_metrics_add(&m->units_rejected, check->cost);
        }
    }
}

/* The strict zones that rejected a request from their memory of Redis's
 * rejections, without asking Redis. */
static inline void
ngx_http_throttle_metrics_denials(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                       i;
    const ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (check->zone && ngx_http_throttle_strict(check->zone)
            && check->decision.result.limited)
        {
            ngx_http_throttle_metrics_add(
                &check->zone->sh->metrics.denial_cache_hits, 1);
        }
    }
}

/* A key was removed to make room; "live" if it was still limited. */
static inline void
ngx_http_throttle_metrics_evicted(ngx_http_throttle_zone_t *zone,
                                  bool                      live) noexcept
{
    ngx_http_throttle_metrics_t *m = &zone->sh->metrics;

    ngx_http_throttle_metrics_add(live ? &m->evicted_live : &m->evicted_drained,
                                  1);
}

/* Under the zone's lock: the zone's unsent units changed by "units" (a key
 * charged, its units taken by a round, kept after a failed one, or gone
 * with the key). */
static inline void
ngx_http_throttle_metrics_pending(ngx_http_throttle_zone_t *zone,
                                  int64_t                   units) noexcept
{
    zone->sh->metrics.pending_units += units;
}

/* Under the zone's lock: an async zone charged units at "now". */
static inline void
ngx_http_throttle_metrics_charged(ngx_http_throttle_zone_t *zone,
                                  int64_t                   now) noexcept
{
    ngx_http_throttle_metrics_t *m = &zone->sh->metrics;

    if (m->unsynced_since == 0) {
        m->unsynced_since = now;
    }

    if (m->charged_since_take == 0) {
        m->charged_since_take = now;
    }
}

/* Async units gone with their key before they reached Redis. */
static inline void
ngx_http_throttle_metrics_lost(ngx_http_throttle_zone_t *zone,
                               int64_t                   units) noexcept
{
    ngx_http_throttle_metrics_add(&zone->sh->metrics.sync_lost_units, units);
}

/* Under the zone's lock: a round took the units due; whether it took every
 * unit the zone had pending. */
static inline bool
ngx_http_throttle_metrics_taken(ngx_http_throttle_zone_t *zone) noexcept
{
    zone->sh->metrics.charged_since_take = 0;
    return zone->sh->metrics.pending_units == 0;
}

/*
 * Under the zone's lock: a round sent at "sent_at" is over. Once Redis
 * has taken every unit a round took, the oldest unit it has not taken is
 * the first one charged since; had the round left units behind (more
 * keys were due than a round takes), they were charged before it was
 * sent, how long before is not kept: the lag then counts from the send.
 */
static inline void
ngx_http_throttle_metrics_synced(ngx_http_throttle_zone_t *zone, bool ok,
                                 bool took_all, int64_t sent_at) noexcept
{
    ngx_http_throttle_metrics_t *m = &zone->sh->metrics;

    if (!ok) {
        ngx_http_throttle_metrics_add(&m->sync_failed, 1);
        return;
    }

    ngx_http_throttle_metrics_add(&m->sync_ok, 1);

    m->unsynced_since =
        took_all ? m->charged_since_take : ngx_max(m->unsynced_since, sent_at);
}

#endif /* NGX_HTTP_THROTTLE_METRICS_H */
