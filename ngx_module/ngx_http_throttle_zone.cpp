/*
 * The shared-memory zone: an rbtree of keys by hash plus an LRU queue, in
 * the zone's slab pool. Every function but init_zone runs with the pool's
 * mutex held by the caller.
 *
 * A decision is made in two steps so that several zones can be checked
 * together and charged only if all pass: lookup (read), then, if the
 * request goes through, reserve (allocate what is missing; may fail) and
 * commit (write; cannot fail).
 */

#include "ngx_http_throttle_module.h"

#include <cstring>

/* Expired nodes freed per lookup: enough to keep up with the arrivals. */
#define NGX_HTTP_THROTTLE_SWEEP 2

/* Least recently used nodes evicted, at most, to make room for one key. */
#define NGX_HTTP_THROTTLE_EVICT 16

static ngx_int_t
ngx_http_throttle_compare(ngx_http_throttle_node_t *tn, const u_char *data,
                          size_t len, ngx_uint_t hashed) noexcept
{
    if (tn->hashed != hashed) {
        return (ngx_int_t) tn->hashed - (ngx_int_t) hashed;
    }

    if (tn->len != len) {
        return (ngx_int_t) tn->len - (ngx_int_t) len;
    }

    return ngx_memcmp(tn->data, data, len);
}

/* Timestamp slots a key of the zone keeps beside its state: a local
 * sliding_log's ring (a strict zone's nodes only cache Redis's denials). */
static size_t
ngx_http_throttle_log_slots(const ngx_http_throttle_zone_t *zone) noexcept
{
    return ngx_http_throttle_strict(zone) ? 0
                                          : (size_t) zone->policy.log_slots();
}

static size_t
ngx_http_throttle_log_offset(size_t key_len) noexcept
{
    return ngx_align(offsetof(ngx_http_throttle_node_t, data) + key_len,
                     sizeof(int64_t));
}

static int64_t *
ngx_http_throttle_log(ngx_http_throttle_node_t *tn) noexcept
{
    return (int64_t *) ((u_char *) tn + ngx_http_throttle_log_offset(tn->len));
}

/* The slab allocation of a key's node: the key, and a sliding_log's ring. */
static size_t
ngx_http_throttle_node_size(const ngx_http_throttle_zone_t *zone,
                            size_t                          key_len) noexcept
{
    if (ngx_http_throttle_log_slots(zone)) {
        return offsetof(ngx_rbtree_node_t, color)
            + ngx_http_throttle_log_offset(key_len)
            + ngx_http_throttle_log_slots(zone) * sizeof(int64_t);
    }

    return offsetof(ngx_rbtree_node_t, color)
        + offsetof(ngx_http_throttle_node_t, data) + key_len;
}

static void
ngx_http_throttle_rbtree_insert_value(ngx_rbtree_node_t *temp,
                                      ngx_rbtree_node_t *node,
                                      ngx_rbtree_node_t *sentinel) noexcept
{
    ngx_rbtree_node_t       **p;
    ngx_http_throttle_node_t *tn, *tnt;

    for (;;) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else {
            tn = (ngx_http_throttle_node_t *) &node->color;
            tnt = (ngx_http_throttle_node_t *) &temp->color;

            p = ngx_http_throttle_compare(tn, tnt->data, tnt->len, tnt->hashed)
                    < 0
                ? &temp->left
                : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

static ngx_rbtree_node_t *
ngx_http_throttle_rbnode(ngx_http_throttle_node_t *tn) noexcept
{
    return (ngx_rbtree_node_t *) ((u_char *) tn
                                  - offsetof(ngx_rbtree_node_t, color));
}

static void
ngx_http_throttle_delete(ngx_http_throttle_zone_t *zone,
                         ngx_http_throttle_node_t *tn) noexcept
{
    ngx_rbtree_node_t *node = ngx_http_throttle_rbnode(tn);

    if (tn->sync_rounds) {
        /* an async key evicted before its consumption reached Redis */
        ngx_queue_remove(&tn->dirty);
        zone->sh->dropped_units +=
            throttle::pending_total(zone->policy, tn->pending);
    }

    ngx_queue_remove(&tn->queue);
    ngx_rbtree_delete(&zone->sh->rbtree, node);
    ngx_slab_free_locked(zone->shpool, node);
}

/* Frees expired nodes from the least recently used end, up to "n". An
 * async key still due a sync stays until it has had it. */
void
ngx_http_throttle_expire(ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                         int64_t now) noexcept
{
    ngx_queue_t              *q;
    ngx_http_throttle_node_t *tn;

    while (n-- && !ngx_queue_empty(&zone->sh->queue)) {
        q = ngx_queue_last(&zone->sh->queue);
        tn = ngx_queue_data(q, ngx_http_throttle_node_t, queue);

        if (tn->expire_at > now || tn->sync_rounds) {
            return;
        }

        ngx_http_throttle_delete(zone, tn);
    }
}

/* Frees the least recently used node, expired or not, to make room. An
 * evicted live key starts afresh next time: that over-admits, so the
 * operator hears of it, once a minute at most. */
static void
ngx_http_throttle_evict(ngx_http_throttle_zone_t *zone, int64_t now,
                        ngx_log_t *log) noexcept
{
    ngx_queue_t              *q;
    ngx_http_throttle_node_t *tn;

    q = ngx_queue_last(&zone->sh->queue);
    tn = ngx_queue_data(q, ngx_http_throttle_node_t, queue);

    if (tn->expire_at > now && now - zone->sh->evict_logged >= 60000000) {
        zone->sh->evict_logged = now;
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "throttle zone \"%V\" is full: evicting keys that are "
                      "still limited, which lets them start afresh; "
                      "consider a larger zone",
                      &zone->name);
    }

    ngx_http_throttle_delete(zone, tn);
}

ngx_http_throttle_node_t *
ngx_http_throttle_find_node(ngx_http_throttle_zone_t *zone, const u_char *data,
                            size_t len, ngx_uint_t hashed) noexcept
{
    uint32_t                  hash = ngx_murmur_hash2((u_char *) data, len);
    ngx_rbtree_node_t        *node, *sentinel;
    ngx_http_throttle_node_t *tn;
    ngx_int_t                 rc;

    node = zone->sh->rbtree.root;
    sentinel = zone->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash != node->key) {
            node = (hash < node->key) ? node->left : node->right;
            continue;
        }

        tn = (ngx_http_throttle_node_t *) &node->color;
        rc = ngx_http_throttle_compare(tn, data, len, hashed);
        if (rc == 0) {
            return tn;
        }

        node = (rc < 0) ? node->right : node->left;
    }

    return NULL;
}

/* Finds the check's node, if the zone holds its key. */
static void
ngx_http_throttle_find(ngx_http_throttle_check_t *check, int64_t now) noexcept
{
    const throttle::ZoneKey &key = check->key;

    ngx_http_throttle_expire(check->zone, NGX_HTTP_THROTTLE_SWEEP, now);

    check->hash = ngx_murmur_hash2((u_char *) key.data(), key.size());
    check->fresh = NULL;
    check->node = ngx_http_throttle_find_node(check->zone, key.data(),
                                              key.size(), key.hashed());
}

void
ngx_http_throttle_lookup(ngx_http_throttle_check_t *check, int64_t now) noexcept
{
    ngx_http_throttle_node_t       *tn;
    const ngx_http_throttle_zone_t *zone = check->zone;
    const throttle::Policy         &policy = zone->policy;
    bool                            live;

    ngx_http_throttle_find(check, now);

    tn = check->node;
    live = tn && tn->expire_at > now;

    if (ngx_http_throttle_strict(zone)
        && policy.algorithm != throttle::Algorithm::gcra)
    {
        check->decision = throttle::recall_denial(
            live ? &tn->state : NULL, live ? tn->expire_at : 0, policy.limit(),
            now, check->cost);
        return;
    }

    check->decision = throttle::decide(
        policy, live ? &tn->state : NULL, now, check->cost,
        live && ngx_http_throttle_log_slots(zone) ? ngx_http_throttle_log(tn)
                                                  : NULL);

    if (ngx_http_throttle_log_slots(zone) && !check->decision.result.limited
        && check->cost > 0)
    {
        check->decision.store = true; /* commit records the entries */
    }
}

/*
 * The denial cache of a Redis-backed zone: what Redis's rejection lets the
 * zone reject by itself until "expire_at" (already in the zone's clock, and
 * never later than the truth: it is measured from when the command was
 * sent). For GCRA it is a lower bound of the key's TAT, which only grows;
 * for the window algorithms see throttle/denial.hpp.
 */
void
ngx_http_throttle_cache_denial(ngx_http_throttle_check_t *check,
                               const throttle::KeyState  &state,
                               int64_t expire_at, int64_t now,
                               ngx_log_t *log) noexcept
{
    ngx_shmtx_lock(&check->zone->shpool->mutex);

    ngx_http_throttle_find(check, now);

    check->decision.store = true;
    check->decision.state = state;
    check->decision.expire_at_us = expire_at;

    if (expire_at > now && ngx_http_throttle_reserve(check, now, log) == NGX_OK)
    {
        ngx_http_throttle_commit(check, now);
    }

    ngx_shmtx_unlock(&check->zone->shpool->mutex);
}

ngx_int_t
ngx_http_throttle_reserve(ngx_http_throttle_check_t *check, int64_t now,
                          ngx_log_t *log) noexcept
{
    const throttle::ZoneKey  &key = check->key;
    ngx_http_throttle_zone_t *zone = check->zone;
    ngx_rbtree_node_t        *node;
    ngx_http_throttle_node_t *tn;
    size_t                    size;
    ngx_uint_t                evicted;

    if (!check->decision.store || check->node) {
        return NGX_OK;
    }

    size = ngx_http_throttle_node_size(zone, key.size());
    node = (ngx_rbtree_node_t *) ngx_slab_alloc_locked(zone->shpool, size);

    for (evicted = 0; node == NULL && evicted < NGX_HTTP_THROTTLE_EVICT
         && !ngx_queue_empty(&zone->sh->queue);
         evicted++)
    {
        ngx_http_throttle_evict(zone, now, log);
        node = (ngx_rbtree_node_t *) ngx_slab_alloc_locked(zone->shpool, size);
    }

    if (node == NULL) {
        if (now - zone->sh->full_logged >= 1000000) {
            zone->sh->full_logged = now;
            ngx_log_error(NGX_LOG_ERR, log, 0,
                          "throttle zone \"%V\" is full and evicting %ui "
                          "keys did not free room for one more",
                          &zone->name, (ngx_uint_t) NGX_HTTP_THROTTLE_EVICT);
        }
        return NGX_ERROR;
    }

    node->key = check->hash;
    tn = (ngx_http_throttle_node_t *) &node->color;
    tn->hashed = key.hashed() ? 1 : 0;
    tn->sync_rounds = 0;
    tn->pending = 0;
    tn->pending_since = 0;
    tn->len = (u_short) key.size();
    ngx_memcpy(tn->data, key.data(), key.size());

    check->fresh = tn;
    return NGX_OK;
}

void
ngx_http_throttle_release(ngx_http_throttle_check_t *check) noexcept
{
    if (check->fresh) {
        ngx_slab_free_locked(check->zone->shpool,
                             ngx_http_throttle_rbnode(check->fresh));
        check->fresh = NULL;
    }
}

void
ngx_http_throttle_commit(ngx_http_throttle_check_t *check, int64_t now) noexcept
{
    ngx_http_throttle_node_t *tn;

    if (!check->decision.store) {
        return;
    }

    tn = check->node;

    if (tn) {
        ngx_queue_remove(&tn->queue);

    } else {
        tn = check->fresh;
        check->fresh = NULL;
        tn->expire_at = 0;
        ngx_rbtree_insert(&check->zone->sh->rbtree,
                          ngx_http_throttle_rbnode(tn));
    }

    if (ngx_http_throttle_log_slots(check->zone)) {
        if (tn->expire_at <= now) {
            tn->state = throttle::KeyState{}; /* every entry has left */
        }

        tn->expire_at = throttle::sliding_log_record(
            check->zone->policy.window, tn->state, ngx_http_throttle_log(tn),
            now, check->cost);

    } else {
        tn->state = check->decision.state;
        tn->expire_at = check->decision.expire_at_us;
    }

    ngx_queue_insert_head(&check->zone->sh->queue, &tn->queue);

    if (check->zone->sync == NGX_HTTP_THROTTLE_SYNC_ASYNC) {
        /* what this node charged since its last sync, for the next one */
        throttle::PendingUnits p = throttle::charge_pending(
            check->zone->policy, {tn->pending, tn->pending_since}, check->cost,
            now, tn->state);
        tn->pending = p.units;
        tn->pending_since = p.since;

        ngx_http_throttle_mark_dirty(check->zone, tn);
    }
}

/* An async key is synced at the next flush, and once more after it, so
 * that it also learns what the other nodes charged meanwhile. */
void
ngx_http_throttle_mark_dirty(ngx_http_throttle_zone_t *zone,
                             ngx_http_throttle_node_t *tn) noexcept
{
    if (tn->sync_rounds == 0) {
        ngx_queue_insert_tail(&zone->sh->dirty, &tn->dirty);
    }

    tn->sync_rounds = 2;
}

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

        units += throttle::pending_total(zone->policy, tn->pending);
        keys += tn->pending ? 1 : 0;
        tn->pending = 0;
        tn->pending_since = 0;
        tn->sync_rounds = 0;
    }

    zone->sh->flusher = 0;

    ngx_shmtx_unlock(&zone->shpool->mutex);

    if (units) {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "throttle_zone \"%V\" no longer syncs with Redis: %L "
                      "units of %ui keys not synced yet are let go",
                      &zone->name, units, keys);
    }
}

ngx_int_t
ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone, void *data) noexcept
{
    ngx_http_throttle_zone_t *ozone = (ngx_http_throttle_zone_t *) data;
    ngx_http_throttle_zone_t *zone;
    size_t                    len, size;
    void                     *node;

    zone = (ngx_http_throttle_zone_t *) shm_zone->data;

    if (ozone) {
        /* a reload: the zone kept its name and size, so keep its keys,
         * unless they no longer mean the same thing */

        if (zone->key.value.len != ozone->key.value.len
            || ngx_strncmp(zone->key.value.data, ozone->key.value.data,
                           zone->key.value.len)
                != 0)
        {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "throttle_zone \"%V\" uses the \"%V\" key while "
                          "previously it used the \"%V\" key; rename the "
                          "zone or change its size to start afresh",
                          &shm_zone->shm.name, &zone->key.value,
                          &ozone->key.value);
            return NGX_ERROR;
        }

        if (zone->policy.algorithm != ozone->policy.algorithm) {
            std::string_view was =
                throttle::algorithm_name(ozone->policy.algorithm);
            std::string_view is =
                throttle::algorithm_name(zone->policy.algorithm);

            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "throttle_zone \"%V\" changed its algorithm from "
                          "%*s to %*s; rename the zone or change its size to "
                          "start afresh",
                          &shm_zone->shm.name, was.size(), was.data(),
                          is.size(), is.data());
            return NGX_ERROR;
        }

        /* a window zone's nodes hold its counts, or in strict mode what
         * it remembers of Redis's denials: not to be read as the other */
        if (zone->policy.algorithm != throttle::Algorithm::gcra
            && ngx_http_throttle_strict(zone)
                != ngx_http_throttle_strict(ozone))
        {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "throttle_zone \"%V\" changed to or from "
                          "sync=strict; rename the zone or change its size "
                          "to start afresh",
                          &shm_zone->shm.name);
            return NGX_ERROR;
        }

        /* the rings were allocated for the old limit */
        if (ngx_http_throttle_log_slots(zone)
            != ngx_http_throttle_log_slots(ozone)) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "throttle_zone \"%V\" changed the limit of its "
                          "sliding_log from %uz to %uz; rename the zone or "
                          "change its size to start afresh",
                          &shm_zone->shm.name,
                          ngx_http_throttle_log_slots(ozone),
                          ngx_http_throttle_log_slots(zone));
            return NGX_ERROR;
        }

        zone->sh = ozone->sh;
        zone->shpool = ozone->shpool;

        if (ozone->sync == NGX_HTTP_THROTTLE_SYNC_ASYNC
            && zone->sync != NGX_HTTP_THROTTLE_SYNC_ASYNC)
        {
            ngx_http_throttle_forget_syncs(zone, shm_zone->shm.log);
        }

        return NGX_OK;
    }

    zone->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        zone->sh = (ngx_http_throttle_shctx_t *) zone->shpool->data;
        return NGX_OK;
    }

    zone->sh = (ngx_http_throttle_shctx_t *) ngx_slab_alloc(
        zone->shpool, sizeof(ngx_http_throttle_shctx_t));
    if (zone->sh == NULL) {
        return NGX_ERROR;
    }

    zone->shpool->data = zone->sh;

    ngx_rbtree_init(&zone->sh->rbtree, &zone->sh->sentinel,
                    ngx_http_throttle_rbtree_insert_value);
    ngx_queue_init(&zone->sh->queue);
    ngx_queue_init(&zone->sh->dirty);
    zone->sh->flush_at = 0;
    zone->sh->flusher = 0;
    zone->sh->flusher_until = 0;
    zone->sh->dropped_units = 0;
    zone->sh->failing = 0;
    zone->sh->full_logged = 0;
    zone->sh->evict_logged = 0;

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
