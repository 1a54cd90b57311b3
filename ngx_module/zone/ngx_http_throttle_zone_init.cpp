/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A throttle_zone's shared memory when nginx starts or reloads: a new
 * zone's bookkeeping, or the keys a reload keeps when the zone kept its
 * name and size, unless they no longer mean the same thing (the key, or
 * what throttle::reload_refusal() says of the policies).
 */

#include "ngx_http_throttle_zone.h"

/* A reload made an async zone local or strict: nothing will sync its keys
 * any more, and a key still due a sync would never expire. Their unsent
 * units are let go, and said so. (The old workers may still be finishing a
 * sync: hence the lock.) */
static void
ngx_http_throttle_forget_syncs(ngx_http_throttle_zone_t *zone,
                               ngx_log_t                *log) noexcept
{
    ngx_queue_t              *q;
    ngx_uint_t                keys = 0;
    int64_t                   units = 0;
    ngx_http_throttle_node_t *tn;

    ngx_shmtx_lock(&zone->shpool->mutex);

    while (!ngx_queue_empty(&zone->sh->dirty)) {
        q = ngx_queue_head(&zone->sh->dirty);
        tn = ngx_queue_data(q, ngx_http_throttle_node_t, dirty);
        ngx_queue_remove(q);

        units += zone->policy.pending_total(tn->stored.pending);
        keys += tn->stored.pending.units ? 1 : 0;
        tn->stored.pending = throttle::PendingUnits{};
        tn->sync_rounds = 0;
    }

    zone->sh->syncer = 0;
    zone->sh->metrics.pending_units = 0;
    zone->sh->metrics.unsynced_since = 0;

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (units) {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "throttle_zone \"%V\" no longer syncs with Redis: %L "
                      "units of %ui keys not synced yet are let go",
                      &zone->name, units, keys);
    }
}

/* A strict zone whose keys are kept by a zone of another mode: their
 * flights (pending.units, throttle::Policy::flight_wait_us()) are not
 * units to sync. */
static void
ngx_http_throttle_forget_flights(ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_queue_t              *q;
    ngx_http_throttle_node_t *tn;

    ngx_shmtx_lock(&zone->shpool->mutex);

    for (q = ngx_queue_head(&zone->sh->queue);
         q != ngx_queue_sentinel(&zone->sh->queue); q = ngx_queue_next(q))
    {
        tn = ngx_queue_data(q, ngx_http_throttle_node_t, queue);
        tn->stored.pending.units = 0;
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

    if (!ngx_http_throttle_str_eq(zone->key.value, ozone->key.value)) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" uses the \"%V\" key while "
                      "previously it used the \"%V\" key; rename the zone or "
                      "change its size to start afresh",
                      &shm_zone->shm.name, &zone->key.value, &ozone->key.value);
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

    zone->sh = ozone->sh;
    zone->shpool = ozone->shpool;

    if (ngx_http_throttle_async(ozone) && !ngx_http_throttle_async(zone)) {
        ngx_http_throttle_forget_syncs(zone, shm_zone->shm.log);
    }

    if (ngx_http_throttle_strict(ozone) && !ngx_http_throttle_strict(zone)) {
        ngx_http_throttle_forget_flights(zone);
    }

    return NGX_OK;
}

/* A new zone: its bookkeeping, and room for at least one key. */
static ngx_int_t
ngx_http_throttle_new_zone(ngx_shm_zone_t           *shm_zone,
                           ngx_http_throttle_zone_t *zone) noexcept
{
    size_t len, size;
    void  *node;

    zone->sh = (ngx_http_throttle_shctx_t *) ngx_slab_calloc(
        zone->shpool, sizeof(ngx_http_throttle_shctx_t));
    if (zone->sh == NULL) {
        return NGX_ERROR;
    }

    zone->shpool->data = zone->sh;

    if (zone->policy.holds_places()) {
        zone->sh->in_flight = (ngx_atomic_t *) ngx_slab_calloc(
            zone->shpool, NGX_MAX_PROCESSES * sizeof(ngx_atomic_t));
        if (zone->sh->in_flight == NULL) {
            return NGX_ERROR;
        }
    }

    ngx_rbtree_init(&zone->sh->rbtree, &zone->sh->sentinel,
                    ngx_http_throttle_rbtree_insert_value);
    ngx_queue_init(&zone->sh->queue);
    ngx_queue_init(&zone->sh->dirty);

    len = sizeof(" in throttle zone \"\"") + shm_zone->shm.name.len;

    zone->shpool->log_ctx = (u_char *) ngx_slab_alloc(zone->shpool, len);
    if (zone->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(zone->shpool->log_ctx, " in throttle zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* a full zone is ours to report, once a second, not the slab's */
    zone->shpool->log_nomem = 0;

    /* a zone that cannot hold one key (a sliding_log's ring can be large)
     * would leave every request to throttle_on_error */
    size = ngx_http_throttle_node_size(zone, throttle::kMaxInlineKeyLen);

    node = ngx_slab_alloc(zone->shpool, size);
    if (node == NULL) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "throttle_zone \"%V\" is too small to hold one key, "
                      "which takes up to %uz bytes; make the zone larger",
                      &shm_zone->shm.name, size);
        return NGX_ERROR;
    }

    ngx_slab_free(zone->shpool, node);

    return NGX_OK;
}

ngx_int_t
ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone, void *data) noexcept
{
    ngx_http_throttle_zone_t *ozone = (ngx_http_throttle_zone_t *) data;
    ngx_http_throttle_zone_t *zone =
        (ngx_http_throttle_zone_t *) shm_zone->data;

    if (ozone) {
        return ngx_http_throttle_reuse_zone(shm_zone, ozone);
    }

    zone->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        zone->sh = (ngx_http_throttle_shctx_t *) zone->shpool->data;
        return NGX_OK;
    }

    return ngx_http_throttle_new_zone(shm_zone, zone);
}
