/*
 * The shared-memory zone: an rbtree of keys by hash plus an LRU queue, in
 * the zone's slab pool, as limit_req's. The functions that read or write
 * keys run with the pool's mutex held by their caller, but for
 * ngx_http_throttle_remember() and init_zone, which take it themselves.
 *
 * A decision is made in two steps so that several zones can be checked
 * together and charged only if all pass: lookup (read), then, if the
 * request goes through, reserve (allocate what is missing; may fail) and
 * commit (write; cannot fail). What a key's node holds is the core's
 * (throttle::StoredKey, and log_slots words after the key's data).
 */

#include "ngx_http_throttle_module.h"
#include "ngx_http_throttle_params.h"

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

/* Where a key's words (throttle::Policy::log_slots) start: after its
 * data, aligned. */
static size_t
ngx_http_throttle_log_offset(size_t key_len) noexcept
{
    return ngx_align(offsetof(ngx_http_throttle_node_t, data) + key_len,
                     sizeof(int64_t));
}

static int64_t *
ngx_http_throttle_node_log(ngx_http_throttle_node_t *tn) noexcept
{
    return (int64_t *) ((u_char *) tn + ngx_http_throttle_log_offset(tn->len));
}

/* The slab allocation of a key's node: the key, and its words. */
static size_t
ngx_http_throttle_node_size(const ngx_http_throttle_zone_t *zone,
                            size_t                          key_len) noexcept
{
    size_t words = (size_t) zone->policy.log_slots;

    if (words) {
        return offsetof(ngx_rbtree_node_t, color)
            + ngx_http_throttle_log_offset(key_len) + words * sizeof(int64_t);
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
            zone->policy.pending_total(tn->stored.pending);
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

        if (tn->stored.expire_at_us > now || tn->sync_rounds) {
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

    if (tn->stored.expire_at_us > now
        && ngx_http_throttle_log_due(&zone->sh->evict_log, now, 60000000))
    {
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
ngx_http_throttle_find(ngx_http_throttle_check_t *check) noexcept
{
    const throttle::ZoneKey &key = check->key;

    ngx_http_throttle_expire(check->zone, NGX_HTTP_THROTTLE_SWEEP, check->now);

    check->hash = ngx_murmur_hash2((u_char *) key.data(), key.size());
    check->fresh = NULL;
    check->node = ngx_http_throttle_find_node(check->zone, key.data(),
                                              key.size(), key.hashed());
}

void
ngx_http_throttle_lookup(ngx_http_throttle_check_t *check) noexcept
{
    ngx_http_throttle_node_t *tn;

    ngx_http_throttle_find(check);

    tn = check->node;
    check->decision = check->zone->policy.decide(
        tn ? &tn->stored : NULL, tn ? ngx_http_throttle_node_log(tn) : NULL,
        check->now, check->cost);
}

/*
 * A strict zone keeps what Redis's rejection lets it reject by itself
 * (throttle::Policy::remember_rejection()); the request still gets Redis's
 * answer.
 */
void
ngx_http_throttle_remember(ngx_http_throttle_check_t *check,
                           ngx_log_t                 *log) noexcept
{
    ngx_http_throttle_zone_t      *zone = check->zone;
    const throttle::ThrottleResult answer = check->decision.result;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    check->decision = zone->policy.remember_rejection(
        answer, check->cost, check->sent_at, check->now);

    if (ngx_http_throttle_reserve(check, log) == NGX_OK) {
        ngx_http_throttle_commit(check);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    check->decision.result = answer;
}

ngx_int_t
ngx_http_throttle_reserve(ngx_http_throttle_check_t *check,
                          ngx_log_t                 *log) noexcept
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
        ngx_http_throttle_evict(zone, check->now, log);
        node = (ngx_rbtree_node_t *) ngx_slab_alloc_locked(zone->shpool, size);
    }

    if (node == NULL) {
        if (ngx_http_throttle_log_due(&zone->sh->full_log, check->now, 1000000))
        {
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
    tn->stored = throttle::StoredKey{};
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
ngx_http_throttle_commit(ngx_http_throttle_check_t *check) noexcept
{
    ngx_http_throttle_node_t *tn;
    ngx_http_throttle_zone_t *zone = check->zone;

    if (!check->decision.store) {
        return;
    }

    tn = check->node;

    if (tn) {
        ngx_queue_remove(&tn->queue);

    } else {
        tn = check->fresh;
        check->fresh = NULL;
        ngx_rbtree_insert(&zone->sh->rbtree, ngx_http_throttle_rbnode(tn));
    }

    zone->policy.commit(check->decision, check->now, check->cost, tn->stored,
                        ngx_http_throttle_node_log(tn));

    ngx_queue_insert_head(&zone->sh->queue, &tn->queue);

    if (ngx_http_throttle_async(zone)) {
        ngx_http_throttle_mark_dirty(zone, tn);
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

        units += zone->policy.pending_total(tn->stored.pending);
        keys += tn->stored.pending.units ? 1 : 0;
        tn->stored.pending = throttle::PendingUnits{};
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
