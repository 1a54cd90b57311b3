/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A throttle_zone's shared memory when nginx starts or reloads: a new
 * zone's bookkeeping, or the keys a reload keeps when the zone kept its
 * name and size, unless they no longer mean the same thing (the key, or
 * what throttle::reload_refusal() says of the policies). Every zone keeps
 * its keys in a table (ngx_http_throttle_table.cpp), made here once, as is
 * the table of the keys it rejects most (ngx_http_throttle_zone_top.cpp).
 */

#include <sys/random.h>

#include "ngx_http_throttle_zone.h"

/* A big allocation's pages must be contiguous; if the pool cannot give
 * them all, it is tried with fewer. */
#define NGX_HTTP_THROTTLE_TABLE_TRIES 8

static ngx_int_t
ngx_http_throttle_table_secret(throttle::SipKey *secret,
                               ngx_log_t        *log) noexcept
{
    ssize_t n;

    /* the kernel's CSPRNG: ngx_random() is predictable, and a client who
     * could predict the secret could make keys that share a budget */
    n = getrandom(secret, sizeof(*secret), 0);
    if (n != (ssize_t) sizeof(*secret)) {
        ngx_log_error(NGX_LOG_EMERG, log, n < 0 ? ngx_errno : 0,
                      "getrandom() failed to make a throttle zone's secret");
        return NGX_ERROR;
    }

    return NGX_OK;
}

/* How many buckets of `width` slots fit in `bytes`. */
static ngx_uint_t
ngx_http_throttle_table_fit(size_t bytes, ngx_uint_t width,
                            ngx_uint_t slot_words) noexcept
{
    return bytes
        / (sizeof(ngx_http_throttle_bucket_t)
           + width * slot_words * sizeof(int64_t));
}

/* The table's buckets and slots in the zone's free pages that
 * throttle::Policy::table_pages() gives it: seven slots a bucket, or
 * fewer if the slots are so large (a sliding_log's) that the zone would
 * hold fewer than 16 buckets; the bucket's other slots stay reserved. */
static u_char *
ngx_http_throttle_table_alloc(ngx_http_throttle_zone_t  *zone,
                              ngx_http_throttle_table_t *t) noexcept
{
    size_t     bytes;
    u_char    *p = NULL;
    ngx_uint_t tries, pages;

    pages = zone->policy.table_pages(zone->shpool->pfree);

    for (tries = 0;
         p == NULL && tries < NGX_HTTP_THROTTLE_TABLE_TRIES && pages > 0;
         tries++)
    {
        bytes = pages-- * ngx_pagesize;

        for (t->width = throttle::kBucketSlots; t->width > 1; t->width--) {
            if (ngx_http_throttle_table_fit(bytes, t->width, t->slot_words)
                >= 16) {
                break;
            }
        }

        t->nbuckets =
            ngx_http_throttle_table_fit(bytes, t->width, t->slot_words);
        if (t->nbuckets == 0) {
            return NULL;
        }

        p = (u_char *) ngx_slab_alloc(
            zone->shpool,
            t->nbuckets
                * (sizeof(ngx_http_throttle_bucket_t)
                   + t->width * t->slot_words * sizeof(int64_t)));
    }

    return p;
}

/* The table, in the pages the zone has left after its bookkeeping. */
static ngx_int_t
ngx_http_throttle_table_create(ngx_http_throttle_zone_t *zone,
                               ngx_log_t                *log) noexcept
{
    unsigned                    s;
    ngx_uint_t                  i;
    u_char                     *p;
    ngx_http_throttle_table_t  *t;
    ngx_http_throttle_bucket_t *b;

    t = (ngx_http_throttle_table_t *) ngx_slab_calloc(
        zone->shpool, sizeof(ngx_http_throttle_table_t));
    if (t == NULL || ngx_http_throttle_table_secret(&t->secret, log) != NGX_OK)
    {
        return NGX_ERROR;
    }

    t->slot_words = (ngx_uint_t) zone->policy.slot_words();

    p = ngx_http_throttle_table_alloc(zone, t);
    if (p == NULL) {
        return NGX_DECLINED;
    }

    /* page-aligned: every bucket is on a cache line of its own */
    b = (ngx_http_throttle_bucket_t *) p;
    for (i = 0; i < t->nbuckets; i++) {
        b[i].order = throttle::kFreshOrder;
        for (s = (unsigned) t->width; s < throttle::kBucketSlots; s++) {
            b[i].order |= throttle::reserved_bit(s);
        }
        ngx_memzero(b[i].tag, sizeof(b[i].tag));
    }

    t->buckets = b;
    t->slots =
        (int64_t *) (p + t->nbuckets * sizeof(ngx_http_throttle_bucket_t));
    ngx_memzero(t->slots,
                t->nbuckets * t->width * t->slot_words * sizeof(int64_t));

    zone->sh->table = t;
    return NGX_OK;
}

/* A reload made an async zone (`ozone`: as it was) local or strict:
 * nothing will sync its keys any more. Their records go, and their unsent
 * units are let go, and said so. (The old workers may still be finishing a
 * sync: hence the lock.) */
static void
ngx_http_throttle_forget_syncs(ngx_http_throttle_zone_t *ozone,
                               ngx_log_t                *log) noexcept
{
    ngx_uint_t                  keys = 0;
    int64_t                     units = 0;
    ngx_http_throttle_record_t *rec;

    ngx_shmtx_lock(&ozone->shpool->mutex);

    while (!ngx_queue_empty(&ozone->sh->dirty)) {
        rec = ngx_queue_data(ngx_queue_head(&ozone->sh->dirty),
                             ngx_http_throttle_record_t, dirty);

        units += ozone->policy.pending_total(rec->pending);
        keys += rec->pending.units ? 1 : 0;
        /* the slot forgets it: old workers may still look it up */
        ngx_http_throttle_record_done(
            ozone, rec, ngx_http_throttle_table_words(ozone, rec->tag));
    }

    ozone->sh->syncs = 0;
    ozone->sh->syncer = 0;
    ozone->sh->metrics.pending_units = 0;
    ozone->sh->metrics.unsynced_since = 0;

    ngx_shmtx_unlock(&ozone->shpool->mutex);

    if (units) {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "throttle_zone \"%V\" no longer syncs with Redis: %L "
                      "units of %ui keys not synced yet are let go",
                      &ozone->name, units, keys);
    }
}

/* A reload into or out of strict mode: a strict zone made in another mode
 * gets flights if its table left room for them (else its requests all go
 * to Redis, as before single flights); a zone that is strict no more lets
 * its flights go. */
static void
ngx_http_throttle_reload_flights(ngx_shm_zone_t           *shm_zone,
                                 ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_shmtx_lock(&zone->shpool->mutex);

    if (!ngx_http_throttle_strict(zone)) {
        ngx_http_throttle_flights_forget(zone);

    } else if (zone->sh->flights == NULL
               && ngx_http_throttle_flights_create(zone, shm_zone->shm.size)
                   != NGX_OK)
    {
        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" has no room left for its keys' "
                      "flights: each of its requests asks Redis",
                      &shm_zone->shm.name);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* A reload: the zone kept its name and size, so it keeps its keys,
 * unless they no longer mean the same thing. */
static ngx_int_t
ngx_http_throttle_reuse_zone(ngx_shm_zone_t           *shm_zone,
                             ngx_http_throttle_zone_t *ozone) noexcept
{
    const char               *refusal;
    throttle::Message         why;
    ngx_http_throttle_zone_t *zone =
        (ngx_http_throttle_zone_t *) shm_zone->data;

    if (!ngx_http_throttle_str_eq(zone->key->cv.value, ozone->key->cv.value)) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" uses the \"%V\" key while "
                      "previously it used the \"%V\" key; rename the zone or "
                      "change its size to start afresh",
                      &shm_zone->shm.name, &zone->key->cv.value,
                      &ozone->key->cv.value);
        return NGX_ERROR;
    }

    refusal = throttle::reload_refusal(ozone->policy, zone->policy, why);
    if (refusal) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" %s; rename the zone or change its "
                      "size to start afresh",
                      &shm_zone->shm.name, refusal);
        return NGX_ERROR;
    }

    if (ozone->sh->table->slot_words != (ngx_uint_t) zone->policy.slot_words())
    {
        /* reload_refusal() keeps the algorithm and its log: never so */
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" keeps %ui words a key, not %L; "
                      "rename the zone or change its size to start afresh",
                      &shm_zone->shm.name, ozone->sh->table->slot_words,
                      zone->policy.slot_words());
        return NGX_ERROR;
    }

    zone->sh = ozone->sh;
    zone->shpool = ozone->shpool;

    ngx_http_throttle_top_reload(zone);

    if (ngx_http_throttle_async(ozone) && !ngx_http_throttle_async(zone)) {
        ngx_http_throttle_forget_syncs(ozone, shm_zone->shm.log);
    }

    ngx_http_throttle_reload_flights(shm_zone, zone);

    return NGX_OK;
}

/* The zone's table, in the rest of the zone (whose secret for the keys'
 * tags is made here, once: a reload keeps it), but for the share an async
 * zone leaves to its records. */
static ngx_int_t
ngx_http_throttle_new_table(ngx_shm_zone_t           *shm_zone,
                            ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_int_t rc;

    ngx_queue_init(&zone->sh->dirty);

    rc = ngx_http_throttle_table_create(zone, shm_zone->shm.log);

    if (rc == NGX_DECLINED) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" is too small to hold one key, "
                      "which takes up to %uz bytes; make the zone larger",
                      &shm_zone->shm.name,
                      sizeof(ngx_http_throttle_bucket_t)
                          + (size_t) zone->policy.slot_words() * 8);
    }

    return rc == NGX_OK ? NGX_OK : NGX_ERROR;
}

/* A new zone: its bookkeeping, and room for at least one key. */
static ngx_int_t
ngx_http_throttle_new_zone(ngx_shm_zone_t           *shm_zone,
                           ngx_http_throttle_zone_t *zone) noexcept
{
    size_t    len;
    ngx_int_t rc;

    /* its top= table comes with it, in one allocation: in a zone of less
     * than 1 MiB, the page the context would take alone holds both */
    zone->sh = (ngx_http_throttle_shctx_t *) ngx_slab_calloc(
        zone->shpool,
        sizeof(ngx_http_throttle_shctx_t)
            + ngx_http_throttle_top_bytes(shm_zone->shm.size));
    if (zone->sh == NULL) {
        return NGX_ERROR;
    }

    ngx_http_throttle_top_create(zone, shm_zone->shm.size,
                                 (u_char *) (zone->sh + 1));

    zone->shpool->data = zone->sh;
    zone->sh->layout = NGX_HTTP_THROTTLE_LAYOUT;
    zone->sh->syncs = ngx_http_throttle_async(zone);

    if (zone->policy.holds_places()) {
        zone->sh->in_flight = (ngx_atomic_t *) ngx_slab_calloc(
            zone->shpool, NGX_MAX_PROCESSES * sizeof(ngx_atomic_t));
        if (zone->sh->in_flight == NULL) {
            return NGX_ERROR;
        }
    }

    /* a strict zone's flights, before the table takes the rest */
    if (ngx_http_throttle_strict(zone)) {
        ngx_shmtx_lock(&zone->shpool->mutex);
        rc = ngx_http_throttle_flights_create(zone, shm_zone->shm.size);
        ngx_shmtx_unlock(&zone->shpool->mutex);
        if (rc != NGX_OK) {
            return NGX_ERROR;
        }
    }

    len = sizeof(" in throttle zone \"\"") + shm_zone->shm.name.len;

    zone->shpool->log_ctx = (u_char *) ngx_slab_alloc(zone->shpool, len);
    if (zone->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(zone->shpool->log_ctx, " in throttle zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* a full zone is ours to report, once a second, not the slab's */
    zone->shpool->log_nomem = 0;

    /* a zone that cannot hold one key would leave every request to
     * throttle_on_error */
    return ngx_http_throttle_new_table(shm_zone, zone);
}

ngx_int_t
ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone, void *data) noexcept
{
    ngx_http_throttle_zone_t *ozone = (ngx_http_throttle_zone_t *) data;
    ngx_http_throttle_zone_t *zone =
        (ngx_http_throttle_zone_t *) shm_zone->data;

    if (ozone && ozone->sh->layout == NGX_HTTP_THROTTLE_LAYOUT) {
        return ngx_http_throttle_reuse_zone(shm_zone, ozone);
    }

    zone->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        zone->sh = (ngx_http_throttle_shctx_t *) zone->shpool->data;
        if (zone->sh->layout == NGX_HTTP_THROTTLE_LAYOUT) {
            return NGX_OK;
        }
    }

    if (ozone || shm_zone->shm.exists) {
        /* written by another layout: its keys cannot be read, and the
         * zone starts afresh. A guard for what should not happen: a
         * reload keeps the module already loaded (dlopen() of the same
         * path), so `ozone` was written by this code, and only Windows
         * maps an existing zone (shm.exists). Were it to happen, old
         * workers still using the zone would see it emptied under them. */
        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" was written by another version "
                      "of the module: it starts afresh",
                      &shm_zone->shm.name);
        ngx_shmtx_lock(&zone->shpool->mutex);
        ngx_slab_init(zone->shpool);
        ngx_shmtx_unlock(&zone->shpool->mutex);
    }

    return ngx_http_throttle_new_zone(shm_zone, zone);
}
