/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A zone's most rejected keys, for throttle_api's top= (docs/api.md, "Who
 * is being limited"): a small table of heavy hitters in the zone's shared
 * memory (throttle::TopTable: the core's rules, the space-saving counts
 * and their decay), made with the zone and kept with it over a reload. It
 * changes only when the zone rejects a request, under the zone's lock: a
 * request that passes never touches it.
 */

#include "ngx_http_throttle_zone.h"

/* The Unix time in ms, as nginx last read it (no system call): the top's
 * times, and its decay periods, are of this clock. */
static int64_t
ngx_http_throttle_top_now_ms() noexcept
{
    ngx_time_t *tp = ngx_timeofday();

    return (int64_t) tp->sec * 1000 + (int64_t) tp->msec;
}

/* The bytes of a zone's table: throttle::top_entries() of the zone's
 * size, 7 KiB at most. */
size_t
ngx_http_throttle_top_bytes(size_t zone_bytes) noexcept
{
    return sizeof(throttle::TopTable)
        + throttle::top_entries(zone_bytes) * sizeof(throttle::TopEntry);
}

/* A new zone's table, in the top_bytes() at `p` (zeroed) that the zone
 * allocated with its shared context. */
void
ngx_http_throttle_top_create(ngx_http_throttle_zone_t *zone, size_t zone_bytes,
                             u_char *p) noexcept
{
    throttle::TopTable *top = (throttle::TopTable *) p;

    *top = throttle::top_table(
        (throttle::TopEntry *) (p + sizeof(throttle::TopTable)),
        throttle::top_entries(zone_bytes), (int64_t) zone->top_decay,
        ngx_http_throttle_top_now_ms());

    zone->sh->top = top;
}

/* A reload kept the zone, and its counts: they decay by its top_decay=
 * from now on (the old workers may still be rejecting: hence the lock). */
void
ngx_http_throttle_top_reload(ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_shmtx_lock(&zone->shpool->mutex);
    throttle::top_set_decay(*zone->sh->top, (int64_t) zone->top_decay,
                            ngx_http_throttle_top_now_ms());
    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* Under the zone's lock, after the check's key was looked up: the zone
 * rejected the request. */
void
ngx_http_throttle_top_record(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_shctx_t *sh = check->zone->sh;
    uint64_t                   tag = check->tag;

    if (tag == 0) {
        tag = throttle::key_tag(sh->table->secret, check->key);
    }

    throttle::top_record(*sh->top, tag, check->key,
                         ngx_http_throttle_top_now_ms());
}

/*
 * The zone's entries as they are now, copied into the pool under the
 * zone's lock and put in the answer's order outside it. The table itself
 * is decayed to now, as an update would. Its decay is the table's: a
 * reload that was refused after it changed it gives it the new one.
 */
ngx_int_t
ngx_http_throttle_top_copy(ngx_http_throttle_zone_t *zone, ngx_pool_t *pool,
                           ngx_http_throttle_top_copy_t *copy) noexcept
{
    throttle::TopTable *top = zone->sh->top;

    copy->size = top->size; /* made with the zone: a reload keeps it */
    copy->entries = (throttle::TopEntry *) ngx_palloc(
        pool, copy->size * sizeof(throttle::TopEntry));
    if (copy->entries == NULL) {
        return NGX_ERROR;
    }

    copy->now_ms = ngx_http_throttle_top_now_ms();

    ngx_shmtx_lock(&zone->shpool->mutex);
    throttle::top_decay(*top, copy->now_ms);
    copy->decay_ms = top->decay_ms;
    ngx_memcpy(copy->entries, top->entries,
               copy->size * sizeof(throttle::TopEntry));
    ngx_shmtx_unlock(&zone->shpool->mutex);

    copy->used = throttle::top_rank(copy->entries, copy->size);
    return NGX_OK;
}
