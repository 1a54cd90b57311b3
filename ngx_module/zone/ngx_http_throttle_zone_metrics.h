/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Recording the figures throttle_metrics reports (ngx_http_throttle_metrics.cpp
 * writes them out): each helper adds what one event of a zone means to the
 * zone's ngx_http_throttle_metrics_t, in its shared memory. Counters are
 * atomic adds, safe without the zone's lock; the helpers that say "under
 * the zone's lock" write gauges that the lock keeps consistent.
 */

#ifndef NGX_HTTP_THROTTLE_ZONE_METRICS_H
#define NGX_HTTP_THROTTLE_ZONE_METRICS_H

#include "ngx_http_throttle_counter.h"
#include "ngx_http_throttle_zone.h"

/* A key was removed to make room; "live" if it was still limited. */
static inline void
ngx_http_throttle_metrics_evicted(ngx_http_throttle_zone_t *zone,
                                  bool                      live) noexcept
{
    ngx_http_throttle_metrics_t *m = &zone->sh->metrics;

    ngx_http_throttle_metrics_add(live ? &m->evicted_live : &m->evicted_drained,
                                  1);
}

/* A request's settle= ended so. */
static inline void
ngx_http_throttle_metrics_settled(ngx_http_throttle_zone_t  *zone,
                                  ngx_http_throttle_settle_e result) noexcept
{
    ngx_http_throttle_metrics_add(&zone->sh->metrics.settles[result], 1);
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

#endif /* NGX_HTTP_THROTTLE_ZONE_METRICS_H */
