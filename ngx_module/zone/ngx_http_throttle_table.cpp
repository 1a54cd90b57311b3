/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A zone's keys: a fixed table in the zone's shared memory, made when the
 * zone is (ngx_http_throttle_zone_init.cpp; docs/architecture.md, "A
 * zone's table").
 * A key is its tag, a keyed hash (throttle::key_tag()), in one of the two
 * buckets its tag names; a bucket is one cache line of seven tags and the
 * slots' recency, and each slot's words (throttle::Policy::slot_words(),
 * what the algorithm needs of the key's state) are in an array beside the
 * buckets. A lookup hashes once and reads one or two buckets' lines, then
 * the slot's words. A new key takes an empty slot of its buckets (of the
 * emptier one), else a stale one, else the least recently used of its two
 * buckets' oldest keys, the one that would go stale first. An async key
 * due a sync has a record too (ngx_http_throttle_records.cpp): it is not
 * stale before its syncs are done, and goes with its key.
 *
 * Everything here runs with the zone's mutex held.
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_zone.h"

/* A slot's number: its bucket's times 7, plus its place in the bucket;
 * its words: its bucket's times the width, plus its place. */
int64_t *
ngx_http_throttle_slot_words(ngx_http_throttle_table_t *t,
                             ngx_uint_t                 slot) noexcept
{
    return t->slots
        + (slot / throttle::kBucketSlots * t->width
           + slot % throttle::kBucketSlots)
        * t->slot_words;
}

/* When the slot may go to another key: an async key due a sync holds it
 * until it has had its syncs. */
static int64_t
ngx_http_throttle_slot_free_at(ngx_http_throttle_zone_t *zone,
                               int64_t                  *words) noexcept
{
    return ngx_http_throttle_record_of(zone, words)
        ? INT64_MAX
        : zone->policy.slot_free_at(words);
}

/* Empties a bucket's slot `i`: it is taken first from now on. */
static void
ngx_http_throttle_table_clear(ngx_http_throttle_zone_t   *zone,
                              ngx_http_throttle_bucket_t *b,
                              unsigned                    i) noexcept
{
    b->tag[i] = 0;
    b->order = throttle::order_drop(b->order, i) & ~throttle::reserved_bit(i);
    zone->sh->metrics.keys--;
}

/* Empties the stale slots of `n` buckets, from where the last sweep
 * stopped: the keys gauge then counts the keys still held, and the next
 * keys of those buckets take an empty slot without a look at the words. */
void
ngx_http_throttle_table_sweep(ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                              int64_t now) noexcept
{
    unsigned                    i;
    ngx_uint_t                  bi;
    ngx_http_throttle_bucket_t *b;
    ngx_http_throttle_table_t  *t = zone->sh->table;

    while (n--) {
        bi = t->sweep;
        t->sweep = (bi + 1) % t->nbuckets;
        b = &t->buckets[bi];

        for (i = 0; i < throttle::kBucketSlots; i++) {
            if (b->tag[i] && !(b->order & throttle::reserved_bit(i))
                && ngx_http_throttle_slot_free_at(
                       zone,
                       ngx_http_throttle_slot_words(
                           t, bi * throttle::kBucketSlots + i))
                    <= now)
            {
                ngx_http_throttle_table_clear(zone, b, i);
            }
        }
    }
}

static ngx_int_t
ngx_http_throttle_table_match(ngx_http_throttle_table_t *t, ngx_uint_t bi,
                              uint64_t tag) noexcept
{
    unsigned                    i;
    ngx_http_throttle_bucket_t *b = &t->buckets[bi];

    for (i = 0; i < throttle::kBucketSlots; i++) {
        if (b->tag[i] == tag) {
            return (ngx_int_t) (bi * throttle::kBucketSlots + i);
        }
    }

    return -1;
}

static ngx_int_t
ngx_http_throttle_table_search(ngx_http_throttle_table_t *t,
                               uint64_t                   tag) noexcept
{
    ngx_int_t                  slot;
    const throttle::BucketPair pair =
        throttle::candidate_buckets(tag, t->nbuckets);

    /* a key not in its first bucket is looked for in its second: both
     * lines are fetched at once rather than one after the other */
    __builtin_prefetch(&t->buckets[pair.second]);

    slot = ngx_http_throttle_table_match(t, pair.first, tag);
    if (slot < 0 && pair.second != pair.first) {
        slot = ngx_http_throttle_table_match(t, pair.second, tag);
    }

    return slot;
}

static void
ngx_http_throttle_table_touch(ngx_http_throttle_table_t *t,
                              ngx_uint_t                 slot) noexcept
{
    ngx_http_throttle_bucket_t *b = &t->buckets[slot / throttle::kBucketSlots];

    b->order = throttle::order_touch(
        b->order, (unsigned) (slot % throttle::kBucketSlots));
}

/* Finds the check's key: its slot, and its state read from it. */
void
ngx_http_throttle_table_find(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_zone_t  *zone = check->zone;
    ngx_http_throttle_table_t *t = zone->sh->table;

    check->tag = throttle::key_tag(t->secret, check->key);
    check->fresh_slot = -1;
    check->slot = ngx_http_throttle_table_search(t, check->tag);

    if (check->slot < 0) {
        check->stored = NULL;
        check->log = NULL;
        return;
    }

    /* a key looked up is used, if only to be refused: a flooding key
     * stays in the zone (as in limit_req's, whose lookup moves it) */
    ngx_http_throttle_table_touch(t, (ngx_uint_t) check->slot);

    int64_t *words = ngx_http_throttle_slot_words(t, (ngx_uint_t) check->slot);
    zone->policy.load_slot(words, check->copy);
    ngx_http_throttle_record_load(zone, words, &check->copy);
    check->stored = &check->copy;
    check->log = zone->policy.slot_log(words);
}

/* Stale slots emptied per lookup: enough to keep up with the arrivals. */
#define NGX_HTTP_THROTTLE_SWEEP 2

/* Finds what the zone holds of the check's key (check->stored, and its
 * words), if anything, after sweeping a little of the table. */
void
ngx_http_throttle_find(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_table_sweep(check->zone, NGX_HTTP_THROTTLE_SWEEP,
                                  check->now);
    ngx_http_throttle_table_find(check);
}

/* What a bucket offers a new key: its slot (-1: every slot is reserved,
 * for keys of the same request), and what that slot holds. */
typedef enum {
    NGX_HTTP_THROTTLE_SLOT_EMPTY = 0,
    NGX_HTTP_THROTTLE_SLOT_STALE,
    NGX_HTTP_THROTTLE_SLOT_LIVE
} ngx_http_throttle_slot_e;

typedef struct {
    ngx_int_t                slot;
    ngx_http_throttle_slot_e holds;
    ngx_uint_t               empty; /* empty slots in the bucket */
} ngx_http_throttle_offer_t;

/* A bucket's slot for a new key: an empty one, else its least recently
 * used stale one, else its least recently used one. */
static ngx_http_throttle_offer_t
ngx_http_throttle_table_offer(ngx_http_throttle_zone_t *zone, ngx_uint_t bi,
                              int64_t now) noexcept
{
    unsigned                  r, i;
    ngx_int_t                 first = (ngx_int_t) (bi * throttle::kBucketSlots);
    ngx_http_throttle_offer_t o = {-1, NGX_HTTP_THROTTLE_SLOT_LIVE, 0};
    ngx_http_throttle_bucket_t *b = &zone->sh->table->buckets[bi];

    for (r = throttle::kBucketSlots; r-- > 0;) {
        i = throttle::order_slot(b->order, r);
        if (b->order & throttle::reserved_bit(i)) {
            continue;
        }

        if (b->tag[i] == 0) {
            o.empty++;
            o.slot = first + (ngx_int_t) i;
            o.holds = NGX_HTTP_THROTTLE_SLOT_EMPTY;

        } else if (o.slot < 0
                   || (o.holds == NGX_HTTP_THROTTLE_SLOT_LIVE
                       && ngx_http_throttle_slot_free_at(
                              zone,
                              ngx_http_throttle_slot_words(
                                  zone->sh->table, (ngx_uint_t) first + i))
                           <= now))
        {
            o.slot = first + (ngx_int_t) i;
            o.holds = ngx_http_throttle_slot_free_at(
                          zone,
                          ngx_http_throttle_slot_words(zone->sh->table,
                                                       (ngx_uint_t) first + i))
                    <= now
                ? NGX_HTTP_THROTTLE_SLOT_STALE
                : NGX_HTTP_THROTTLE_SLOT_LIVE;
        }
    }

    return o;
}

/* The slot a new key takes of its two buckets': an empty one (of the
 * emptier bucket, which keeps both room to spare), else a stale one, else
 * of the two buckets' least recently used keys the one that would go
 * stale first. */
static ngx_http_throttle_offer_t
ngx_http_throttle_table_choose(ngx_http_throttle_zone_t   *zone,
                               const throttle::BucketPair &pair,
                               int64_t                     now) noexcept
{
    ngx_http_throttle_offer_t  o1, o2;
    ngx_http_throttle_table_t *t = zone->sh->table;

    o1 = ngx_http_throttle_table_offer(zone, pair.first, now);
    if (pair.second == pair.first) {
        return o1;
    }
    o2 = ngx_http_throttle_table_offer(zone, pair.second, now);

    if (o1.slot < 0 || o2.slot < 0) {
        return o1.slot < 0 ? o2 : o1;
    }
    if (o1.empty || o2.empty) {
        return o1.empty >= o2.empty ? o1 : o2;
    }
    if (o1.holds != o2.holds) {
        return o1.holds < o2.holds ? o1 : o2;
    }

    return ngx_http_throttle_slot_free_at(
               zone, ngx_http_throttle_slot_words(t, (ngx_uint_t) o1.slot))
            <= ngx_http_throttle_slot_free_at(
                zone, ngx_http_throttle_slot_words(t, (ngx_uint_t) o2.slot))
        ? o1
        : o2;
}

/* A key evicted to make room (`live`: still limited), as `why` says: an
 * evicted live key starts afresh next time, which over-admits, and an
 * async key's units not synced are lost, so the operator hears of it,
 * once a minute at most. */
void
ngx_http_throttle_table_evicted(ngx_http_throttle_zone_t *zone, bool live,
                                const char *why, int64_t now,
                                ngx_log_t *log) noexcept
{
    ngx_http_throttle_metrics_evicted(zone, live);

    if (ngx_http_throttle_log_due(&zone->sh->evict_log, now, 60000000)) {
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "throttle zone \"%V\" is full: %s; consider a larger "
                      "zone",
                      &zone->name, why);
    }
}

/* A slot for the check's key, reserved (no other key takes it before the
 * key is committed or released), holding a fresh key's state. */
void
ngx_http_throttle_table_reserve(ngx_http_throttle_lookup_t *check,
                                ngx_log_t                  *log) noexcept
{
    unsigned                    i;
    int64_t                    *words;
    ngx_int_t                   slot;
    ngx_http_throttle_zone_t   *zone = check->zone;
    ngx_http_throttle_table_t  *t = zone->sh->table;
    ngx_http_throttle_bucket_t *b;
    ngx_http_throttle_offer_t   o;

    o = ngx_http_throttle_table_choose(
        zone, throttle::candidate_buckets(check->tag, t->nbuckets), check->now);
    slot = o.slot;
    if (slot < 0) {
        return; /* never with fewer than 7 keys of a request in a zone */
    }

    b = &t->buckets[(ngx_uint_t) slot / throttle::kBucketSlots];
    i = (unsigned) ((ngx_uint_t) slot % throttle::kBucketSlots);
    words = ngx_http_throttle_slot_words(t, (ngx_uint_t) slot);

    /* an async key evicted before it was synced: its units are lost */
    ngx_http_throttle_record_drop(zone, words);

    if (o.holds == NGX_HTTP_THROTTLE_SLOT_LIVE) {
        ngx_http_throttle_table_evicted(zone, true,
                                        "evicting keys that are still "
                                        "limited, which lets them start "
                                        "afresh",
                                        check->now, log);

    } else if (o.holds == NGX_HTTP_THROTTLE_SLOT_STALE) {
        /* a drained key the sweep had not reached yet */
        ngx_http_throttle_metrics_evicted(zone, false);
    }

    if (b->tag[i] == 0) {
        zone->sh->metrics.keys++;
    }

    b->tag[i] = check->tag;
    b->order |= throttle::reserved_bit(i);

    check->copy = throttle::StoredKey{};
    zone->policy.store_slot(check->copy, words);
    check->fresh_slot = slot;
}

void
ngx_http_throttle_table_release(ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_uint_t                 slot = (ngx_uint_t) check->fresh_slot;
    ngx_http_throttle_table_t *t = check->zone->sh->table;

    if (check->fresh_slot < 0) {
        return;
    }

    ngx_http_throttle_table_clear(check->zone,
                                  &t->buckets[slot / throttle::kBucketSlots],
                                  (unsigned) (slot % throttle::kBucketSlots));
    check->fresh_slot = -1;
}

/*
 * The check's state, to be written: the key's, or the reserved slot's (a
 * fresh key's). Another key of the same request in this zone may have
 * taken the key's slot since it was found: then it is found again, or
 * given a slot now.
 */
throttle::StoredKey *
ngx_http_throttle_table_take(ngx_http_throttle_lookup_t *check,
                             ngx_log_t                  *log) noexcept
{
    ngx_int_t                  slot;
    ngx_http_throttle_table_t *t = check->zone->sh->table;

    slot = check->fresh_slot >= 0 ? check->fresh_slot : check->slot;

    if (slot < 0
        || t->buckets[(ngx_uint_t) slot / throttle::kBucketSlots]
                .tag[(ngx_uint_t) slot % throttle::kBucketSlots]
            != check->tag)
    {
        ngx_http_throttle_table_find(check);
        if (check->slot < 0) {
            ngx_http_throttle_table_reserve(check, log);
            if (check->fresh_slot < 0) {
                return NULL;
            }
        }
        slot = check->fresh_slot >= 0 ? check->fresh_slot : check->slot;
    }

    check->slot = slot;
    check->fresh_slot = -1;
    check->stored = &check->copy;
    check->log = check->zone->policy.slot_log(
        ngx_http_throttle_slot_words(t, (ngx_uint_t) slot));

    return &check->copy;
}

/* Writes the state taken back into its slot, now the most recently used
 * of its bucket. */
void
ngx_http_throttle_table_put(ngx_http_throttle_lookup_t *check) noexcept
{
    unsigned                    i;
    ngx_uint_t                  slot = (ngx_uint_t) check->slot;
    ngx_http_throttle_table_t  *t = check->zone->sh->table;
    ngx_http_throttle_bucket_t *b = &t->buckets[slot / throttle::kBucketSlots];

    i = (unsigned) (slot % throttle::kBucketSlots);

    check->zone->policy.store_slot(check->copy,
                                   ngx_http_throttle_slot_words(t, slot));
    b->order = throttle::order_touch(b->order, i) & ~throttle::reserved_bit(i);
}

int64_t *
ngx_http_throttle_table_words(ngx_http_throttle_zone_t *zone,
                              uint64_t                  tag) noexcept
{
    ngx_int_t                  slot;
    ngx_http_throttle_table_t *t = zone->sh->table;

    slot = ngx_http_throttle_table_search(t, tag);

    return slot < 0 ? NULL : ngx_http_throttle_slot_words(t, (ngx_uint_t) slot);
}

void
ngx_http_throttle_table_drop(ngx_http_throttle_zone_t *zone,
                             uint64_t                  tag) noexcept
{
    ngx_int_t                  slot;
    ngx_http_throttle_table_t *t = zone->sh->table;

    slot = ngx_http_throttle_table_search(t, tag);
    if (slot < 0) {
        return;
    }

    ngx_http_throttle_table_clear(
        zone, &t->buckets[(ngx_uint_t) slot / throttle::kBucketSlots],
        (unsigned) ((ngx_uint_t) slot % throttle::kBucketSlots));
}
