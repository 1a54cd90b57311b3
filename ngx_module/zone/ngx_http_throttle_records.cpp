/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An async zone's records (docs/architecture.md, "A zone's table"): its
 * keys live in the table as a local zone's do; a key charged since its
 * last sync also has a record in the pages the table left, which holds
 * its units not sent yet and the name the sync sends to Redis, and stands
 * in the zone's "dirty" queue, least recently charged first, for as long
 * as syncs are due (throttle::kSyncRounds). Its slot refers to it
 * (throttle::Policy::slot_record()), and it names its slot by the key's
 * tag.
 *
 * When there is no room for a new record, the next round is brought
 * forward (the next tick takes the keys due), and the table makes room
 * (ngx_http_throttle_due.cpp): the least recently charged record
 * goes, early if it has only a read left to do (no units), else with its
 * key, whose units are counted as lost, as an evicted key's are. This
 * file only stores records: it never looks into the table.
 *
 * Everything here runs with the zone's mutex held.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_zone.h"

#include "throttle/sync_schedule.hpp"

ngx_http_throttle_record_t *
ngx_http_throttle_record_of(ngx_http_throttle_zone_t *zone,
                            int64_t                  *words) noexcept
{
    int64_t *ref = zone->policy.slot_record(words);

    return ref ? (ngx_http_throttle_record_t *) (uintptr_t) *ref : NULL;
}

/* The key's pending units, read from its slot's record (none without
 * one); other zones keep no units. A key looked up is used, if only to be
 * refused: its record goes to the back of the queue that makes room, so
 * that a limited key still tried is the last to go (with its units, and
 * its limit). */
void
ngx_http_throttle_record_load(ngx_http_throttle_zone_t *zone, int64_t *words,
                              throttle::StoredKey *key) noexcept
{
    ngx_http_throttle_record_t *rec;

    if (zone->policy.slot_record(words) == NULL) {
        return;
    }

    rec = ngx_http_throttle_record_of(zone, words);
    key->pending = rec ? rec->pending : throttle::PendingUnits{};

    if (rec) {
        ngx_queue_remove(&rec->dirty);
        ngx_queue_insert_tail(&zone->sh->dirty, &rec->dirty);
    }
}

/* A record goes (its syncs are over, or its key left): `words`, its slot's
 * words if the caller found them, no longer refer to it. */
void
ngx_http_throttle_record_done(ngx_http_throttle_zone_t   *zone,
                              ngx_http_throttle_record_t *rec,
                              int64_t                    *words) noexcept
{
    if (words && ngx_http_throttle_record_of(zone, words) == rec) {
        *zone->policy.slot_record(words) = 0;
    }

    ngx_queue_remove(&rec->dirty);
    ngx_slab_free_locked(zone->shpool, rec);
}

/* Units that will never reach Redis: their key went before they did. */
void
ngx_http_throttle_record_lost(ngx_http_throttle_zone_t *zone,
                              int64_t                   units) noexcept
{
    zone->sh->dropped_units += units;
    ngx_http_throttle_metrics_lost(zone, units);
}

/* The slot's record goes, if it has one, and its units not sent yet
 * with it: returns how many. */
int64_t
ngx_http_throttle_record_remove(ngx_http_throttle_zone_t *zone,
                                int64_t                  *words) noexcept
{
    int64_t                     units;
    ngx_http_throttle_record_t *rec = ngx_http_throttle_record_of(zone, words);

    if (rec == NULL) {
        return 0;
    }

    units = zone->policy.pending_total(rec->pending);
    ngx_http_throttle_metrics_pending(zone, -units);
    ngx_http_throttle_record_done(zone, rec, words);

    return units;
}

/* The slot's key leaves the zone (evicted): so do its record and its
 * units not sent yet, which are lost. */
void
ngx_http_throttle_record_drop(ngx_http_throttle_zone_t *zone,
                              int64_t                  *words) noexcept
{
    int64_t units = ngx_http_throttle_record_remove(zone, words);

    if (units) {
        ngx_http_throttle_record_lost(zone, units);
    }
}

/* The bytes of a record's rate, after its name: only where rate= is a
 * variable, so that other zones' records keep their size. */
static size_t
ngx_http_throttle_record_rate_len(ngx_http_throttle_zone_t *zone) noexcept
{
    return zone->policy.rate_varies ? sizeof(uint32_t) : 0;
}

/* The rate of the key's latest request, packed (throttle::pack_rate()); 0
 * where rate= is constant (throttle::synced_plan() has the zone's). */
uint32_t
ngx_http_throttle_record_rate(ngx_http_throttle_zone_t   *zone,
                              ngx_http_throttle_record_t *rec) noexcept
{
    uint32_t rate = 0;

    if (ngx_http_throttle_record_rate_len(zone)) {
        ngx_memcpy(&rate, rec->data + rec->len, sizeof(uint32_t));
    }

    return rate;
}

/* A record for the key; NULL if the zone has no room for it (the caller
 * makes room: ngx_http_throttle_due.cpp). */
static ngx_http_throttle_record_t *
ngx_http_throttle_record_alloc(ngx_http_throttle_zone_t *zone,
                               const throttle::ZoneKey  &key,
                               int64_t                   now) noexcept
{
    size_t                      size;
    ngx_http_throttle_record_t *rec;

    size = offsetof(ngx_http_throttle_record_t, data) + key.size()
        + ngx_http_throttle_record_rate_len(zone);
    rec = (ngx_http_throttle_record_t *) ngx_slab_alloc_locked(zone->shpool,
                                                               size);

    if (rec == NULL) {
        /* the next tick takes the keys due, whatever the schedule */
        zone->sh->next_round = ngx_min(zone->sh->next_round, now);
        return NULL;
    }

    rec->len = (u_char) key.size();
    rec->hashed = key.hashed() ? 1 : 0;
    rec->pending = throttle::PendingUnits{};
    ngx_memcpy(rec->data, key.data(), key.size());
    ngx_queue_insert_tail(&zone->sh->dirty, &rec->dirty);

    return rec;
}

/*
 * An async key (in the slot `words`, tagged `tag`) was charged or settled
 * (where rate= is a variable: at `rate`, which its syncs use from now on),
 * or a sync of it failed: its units not sent are now `pending`, and it is
 * due a sync at the next round and once more after it, so that it also
 * learns what the other nodes charged meanwhile. Its record is made if it
 * has none: NGX_DECLINED if the zone has no room for it (nothing is kept
 * then). Once a reload has made the zone local or strict, the old
 * workers' units are let go as those pending then were.
 */
ngx_int_t
ngx_http_throttle_record_keep(ngx_http_throttle_zone_t *zone, int64_t *words,
                              uint64_t tag, const throttle::ZoneKey &key,
                              const throttle::PendingUnits &pending,
                              uint32_t rate, int64_t now,
                              ngx_log_t *log) noexcept
{
    int64_t                     was = 0;
    ngx_http_throttle_record_t *rec = ngx_http_throttle_record_of(zone, words);

    if (!zone->sh->syncs) {
        return NGX_OK; /* an old worker's, after a reload ended the syncs */
    }

    if (rec) {
        /* the queue is also the order of eviction: least recently used
         * first, so that a busy key is the last to go */
        was = zone->policy.pending_total(rec->pending);
        ngx_queue_remove(&rec->dirty);
        ngx_queue_insert_tail(&zone->sh->dirty, &rec->dirty);

    } else {
        rec = ngx_http_throttle_record_alloc(zone, key, now);
        if (rec == NULL) {
            return NGX_DECLINED;
        }

        rec->tag = tag;
        *zone->policy.slot_record(words) = (int64_t) (uintptr_t) rec;
    }

    rec->pending = pending;
    rec->sync_rounds = throttle::kSyncRounds;
    ngx_memcpy(rec->data + rec->len, &rate,
               ngx_http_throttle_record_rate_len(zone));
    ngx_http_throttle_metrics_pending(
        zone, zone->policy.pending_total(pending) - was);

    return NGX_OK;
}

/* No room could be made for the record of a key charged `pending`: its
 * units are lost. */
void
ngx_http_throttle_record_lose(ngx_http_throttle_zone_t     *zone,
                              const throttle::PendingUnits &pending,
                              int64_t now, ngx_log_t *log) noexcept
{
    ngx_http_throttle_record_lost(zone, zone->policy.pending_total(pending));

    if (ngx_http_throttle_log_due(&zone->sh->full_log, now, 1000000)) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "throttle zone \"%V\" has no room for one more key due "
                      "a sync: its units are lost",
                      &zone->name);
    }
}
