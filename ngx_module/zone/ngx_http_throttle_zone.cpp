/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The shared-memory zone: an rbtree of keys by hash plus an LRU queue, in
 * the zone's slab pool, as limit_req's. The functions that read or write
 * keys run with the pool's mutex held by their caller, but for
 * ngx_http_throttle_remember(), which takes it itself. How a zone starts,
 * or is kept over a reload, is in ngx_http_throttle_zone_init.cpp.
 *
 * A decision is made in two steps so that several zones can be checked
 * together and charged only if all pass: lookup (read), then, if the
 * request goes through, reserve (allocate what is missing; may fail) and
 * commit (write; cannot fail). What a key's node holds is the core's
 * (throttle::StoredKey, and log_slots words after the key's data).
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_zone.h"
#include "ngx_http_throttle_params.h"

#include "throttle/sync_schedule.hpp"

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

int64_t *
ngx_http_throttle_node_log(ngx_http_throttle_node_t *tn) noexcept
{
    return (int64_t *) ((u_char *) tn + ngx_http_throttle_log_offset(tn->len));
}

/* The slab allocation of a key's node: the key, and its words. */
size_t
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

void
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
    int64_t            units;
    ngx_rbtree_node_t *node = ngx_http_throttle_rbnode(tn);

    if (tn->sync_rounds) {
        /* an async key evicted before its consumption reached Redis */
        units = zone->policy.pending_total(tn->stored.pending);
        ngx_queue_remove(&tn->dirty);
        zone->sh->dropped_units += units;
        ngx_http_throttle_metrics_lost(zone, units);
        ngx_http_throttle_metrics_pending(zone, -units);
    }

    ngx_queue_remove(&tn->queue);
    ngx_rbtree_delete(&zone->sh->rbtree, node);
    ngx_slab_free_locked(zone->shpool, node);
    zone->sh->metrics.keys--;
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
    bool                      live;
    ngx_queue_t              *q;
    ngx_http_throttle_node_t *tn;

    q = ngx_queue_last(&zone->sh->queue);
    tn = ngx_queue_data(q, ngx_http_throttle_node_t, queue);
    live = tn->stored.expire_at_us > now;

    ngx_http_throttle_metrics_evicted(zone, live);

    if (live && ngx_http_throttle_log_due(&zone->sh->evict_log, now, 60000000))
    {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "throttle zone \"%V\" is full: evicting keys that are "
                      "still limited, which lets them start afresh; "
                      "consider a larger zone",
                      &zone->name);
    }

    ngx_http_throttle_delete(zone, tn);
}

uint32_t
ngx_http_throttle_key_hash(const u_char *data, size_t len) noexcept
{
    return ngx_murmur_hash2((u_char *) data, len);
}

ngx_http_throttle_node_t *
ngx_http_throttle_find_node(ngx_http_throttle_zone_t *zone, const u_char *data,
                            size_t len, ngx_uint_t hashed,
                            uint32_t hash) noexcept
{
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

/* Finds the check's node, if the zone holds its key (under the lock). */
void
ngx_http_throttle_find(ngx_http_throttle_lookup_t *check) noexcept
{
    const throttle::ZoneKey &key = check->key;

    ngx_http_throttle_expire(check->zone, NGX_HTTP_THROTTLE_SWEEP, check->now);

    check->hash = ngx_http_throttle_key_hash(key.data(), key.size());
    check->fresh = NULL;
    check->node = ngx_http_throttle_find_node(
        check->zone, key.data(), key.size(), key.hashed(), check->hash);
}

void
ngx_http_throttle_lookup(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_node_t *tn;

    ngx_http_throttle_find(check);

    tn = check->node;
    check->part->decision = check->zone->policy.decide(
        tn ? &tn->stored : NULL, tn ? ngx_http_throttle_node_log(tn) : NULL,
        check->now, check->part->cost);
    check->part->flight_wait_us = check->zone->policy.flight_wait_us(
        tn ? &tn->stored : NULL, check->part->decision, check->now);
}

/*
 * A strict zone keeps what Redis's answer lets it reject by itself
 * (throttle::Policy::remember_answer()); the request still gets Redis's
 * answer.
 */
void
ngx_http_throttle_remember(ngx_http_throttle_lookup_t *check, int64_t sent_at,
                           ngx_log_t *log) noexcept
{
    ngx_http_throttle_zone_t      *zone = check->zone;
    const throttle::ThrottleResult answer = check->part->decision.result;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    check->part->decision = zone->policy.remember_answer(
        check->node ? &check->node->stored : NULL, answer, check->part->cost,
        sent_at, check->now);

    if (ngx_http_throttle_reserve(check, log) == NGX_OK) {
        ngx_http_throttle_commit(check);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    check->part->decision.result = answer;
}

/*
 * A strict zone is about to send a script that moves the check's key other
 * than a decision does (a refund, a settle): it forgets what it remembers
 * of the key, and the answers to scripts sent before Redis will have run
 * it, within `timeout_ms` (throttle::Policy::forget_answers()).
 */
void
ngx_http_throttle_forget_answers(ngx_http_throttle_lookup_t *check,
                                 ngx_msec_t timeout_ms) noexcept
{
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->node) {
        zone->policy.forget_answers(check->node->stored, check->now,
                                    check->now + (int64_t) timeout_ms * 1000);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* A node for the check's key, not yet inserted (check->fresh), evicting
 * the least recently used keys if the zone is full. */
static ngx_int_t
ngx_http_throttle_alloc_node(ngx_http_throttle_lookup_t *check,
                             ngx_log_t                  *log) noexcept
{
    const throttle::ZoneKey  &key = check->key;
    ngx_http_throttle_zone_t *zone = check->zone;
    ngx_rbtree_node_t        *node;
    ngx_http_throttle_node_t *tn;
    size_t                    size;
    ngx_uint_t                evicted;

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

ngx_int_t
ngx_http_throttle_reserve(ngx_http_throttle_lookup_t *check,
                          ngx_log_t                  *log) noexcept
{
    if (!check->part->decision.store || check->node) {
        return NGX_OK;
    }

    return ngx_http_throttle_alloc_node(check, log);
}

void
ngx_http_throttle_release(ngx_http_throttle_lookup_t *check) noexcept
{
    if (check->fresh) {
        ngx_slab_free_locked(check->zone->shpool,
                             ngx_http_throttle_rbnode(check->fresh));
        check->fresh = NULL;
    }
}

/* The check's node, out of the recency queue to be written (its caller
 * puts it back at the head): the one found, or the fresh one, inserted. */
static ngx_http_throttle_node_t *
ngx_http_throttle_take_node(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_node_t *tn = check->node;
    ngx_http_throttle_zone_t *zone = check->zone;

    if (tn) {
        ngx_queue_remove(&tn->queue);
        return tn;
    }

    tn = check->fresh;
    check->fresh = NULL;
    ngx_rbtree_insert(&zone->sh->rbtree, ngx_http_throttle_rbnode(tn));
    zone->sh->metrics.keys++;
    return tn;
}

/* In an async zone, a key whose units unsent were `unsent` has been
 * charged or settled at `now` (`sends`: with units for Redis): the zone
 * counts them, and the key is due a sync (charged 0, to learn what the
 * other nodes charged). */
static void
ngx_http_throttle_async_changed(ngx_http_throttle_zone_t *zone,
                                ngx_http_throttle_node_t *tn, int64_t unsent,
                                int64_t now, bool sends) noexcept
{
    ngx_http_throttle_metrics_pending(
        zone, zone->policy.pending_total(tn->stored.pending) - unsent);

    if (sends) {
        ngx_http_throttle_metrics_charged(zone, now);
    }

    ngx_http_throttle_mark_dirty(zone, tn);
}

void
ngx_http_throttle_commit(ngx_http_throttle_lookup_t *check) noexcept
{
    int64_t                   unsent;
    ngx_http_throttle_node_t *tn;
    ngx_http_throttle_zone_t *zone = check->zone;

    if (!check->part->decision.store) {
        return;
    }

    tn = ngx_http_throttle_take_node(check);

    unsent = ngx_http_throttle_async(zone)
        ? zone->policy.pending_total(tn->stored.pending)
        : 0;

    zone->policy.commit(check->part->decision, check->now, check->part->cost,
                        tn->stored, ngx_http_throttle_node_log(tn));

    ngx_queue_insert_head(&zone->sh->queue, &tn->queue);

    if (ngx_http_throttle_async(zone)) {
        ngx_http_throttle_async_changed(zone, tn, unsent, check->now,
                                        check->part->cost > 0);
    }
}

/* An async key is synced at the next round, and once more after it, so
 * that it also learns what the other nodes charged meanwhile. */
void
ngx_http_throttle_mark_dirty(ngx_http_throttle_zone_t *zone,
                             ngx_http_throttle_node_t *tn) noexcept
{
    if (tn->sync_rounds == 0) {
        ngx_queue_insert_tail(&zone->sh->dirty, &tn->dirty);
    }

    tn->sync_rounds = throttle::kSyncRounds;
}

/*
 * settle=, in a local or async zone: the key the request was charged
 * `reserved` units for at reserved_at is charged settled - reserved more,
 * or given the difference back (throttle::Policy::settle()); an async key
 * sends what changed with its next sync. A key the zone no longer holds
 * gets a node for a charge; a refund to it has nothing to give back.
 * NGX_ERROR if the zone had no room for the charge.
 */
ngx_int_t
ngx_http_throttle_settle_key(ngx_http_throttle_lookup_t *check,
                             int64_t reserved_units, int64_t settled_units,
                             int64_t reserved_at, ngx_log_t *log) noexcept
{
    int64_t                   unsent;
    ngx_int_t                 rc = NGX_OK;
    ngx_http_throttle_node_t *tn;
    ngx_http_throttle_zone_t *zone = check->zone;
    throttle::PendingUnits    pending;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->node == NULL && settled_units > reserved_units) {
        rc = ngx_http_throttle_alloc_node(check, log);
    }

    if (rc == NGX_OK && (check->node || check->fresh)) {
        tn = ngx_http_throttle_take_node(check);
        pending = tn->stored.pending;
        unsent = zone->policy.pending_total(pending);

        zone->policy.settle(tn->stored, ngx_http_throttle_node_log(tn),
                            reserved_units, settled_units, reserved_at,
                            check->now);
        ngx_queue_insert_head(&zone->sh->queue, &tn->queue);

        if (tn->stored.pending.units != pending.units
            || tn->stored.pending.since != pending.since)
        {
            ngx_http_throttle_async_changed(zone, tn, unsent, check->now, true);
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return rc;
}
