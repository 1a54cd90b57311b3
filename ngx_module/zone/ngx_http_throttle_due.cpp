/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An async key due a sync, charged by a request or back from a sync that
 * failed: its record (ngx_http_throttle_records.cpp) keeps its units, and
 * where the zone has no room for a new record, the table makes room
 * (ngx_http_throttle_table.cpp) by letting the least recently charged
 * records go, with their keys if they still had units to send. Here, the
 * two meet; neither calls the other.
 *
 * Everything here runs with the zone's mutex held.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_zone.h"

/* Records made way for, at most, to make room for one. */
#define NGX_HTTP_THROTTLE_EVICT 16

/* Makes room for a record: the least recently charged one goes, early if
 * it has only a read left to do, else with its key. */
static void
ngx_http_throttle_due_make_room(ngx_http_throttle_zone_t *zone, int64_t now,
                                ngx_log_t *log) noexcept
{
    int64_t                    *words, units;
    uint64_t                    tag;
    throttle::StoredKey         held;
    ngx_http_throttle_record_t *rec;

    rec = ngx_queue_data(ngx_queue_head(&zone->sh->dirty),
                         ngx_http_throttle_record_t, dirty);
    tag = rec->tag;
    words = ngx_http_throttle_table_words(zone, tag);

    if (rec->sync_rounds == 1 && zone->policy.pending_total(rec->pending) == 0)
    {
        ngx_http_throttle_record_done(zone, rec, words);
        return;
    }

    if (words == NULL) { /* never so: a record's key has its slot */
        units = zone->policy.pending_total(rec->pending);
        ngx_http_throttle_record_lost(zone, units);
        ngx_http_throttle_metrics_pending(zone, -units);
        ngx_http_throttle_record_done(zone, rec, NULL);
        return;
    }

    zone->policy.load_slot(words, held);
    ngx_http_throttle_table_evicted(zone, held.expire_at_us > now,
                                    "evicting the least recently charged of "
                                    "the keys due a sync, whose units are "
                                    "lost",
                                    now, log);

    ngx_http_throttle_record_drop(zone, words); /* frees rec */
    ngx_http_throttle_table_drop(zone, tag);
}

/* An async key (in the slot `words`, tagged `tag`), charged or settled
 * by a request or back from a sync that failed: its record keeps its
 * units `pending`, and the rate of the latest request's plan. Where the
 * zone has no room for a new record, the least recently charged ones make
 * room, a few at most; else the key's units are lost, and counted so. */
void
ngx_http_throttle_due_keep(ngx_http_throttle_zone_t *zone, int64_t *words,
                           uint64_t tag, const throttle::ZoneKey &key,
                           const throttle::PendingUnits &pending, uint32_t rate,
                           int64_t now, ngx_log_t *log) noexcept
{
    ngx_uint_t n;
    ngx_int_t  rc;

    for (n = 0;; n++) {
        rc = ngx_http_throttle_record_keep(zone, words, tag, key, pending, rate,
                                           now, log);

        if (rc == NGX_OK || n == NGX_HTTP_THROTTLE_EVICT
            || ngx_queue_empty(&zone->sh->dirty))
        {
            break;
        }

        ngx_http_throttle_due_make_room(zone, now, log);
    }

    if (rc != NGX_OK) {
        ngx_http_throttle_record_lose(zone, pending, now, log);
    }
}
