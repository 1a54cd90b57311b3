/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A zone: its shared memory (keys by hash and by recency, the figures
 * throttle_metrics reports), its configuration, and a key's lookup between
 * decide and commit. The request path and the endpoints use it; it knows
 * nothing of them.
 */

#ifndef NGX_HTTP_THROTTLE_ZONE_H
#define NGX_HTTP_THROTTLE_ZONE_H

#include "ngx_http_throttle_conf.h"
#include "ngx_http_throttle_log.h"
#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_redis.h"

#include "throttle/key.hpp"
#include "throttle/plans.hpp"
#include "throttle/policy.hpp"
#include "throttle/request.hpp"
#include "throttle/table.hpp"
#include "throttle/top.hpp"

/* What a zone's shared memory starts with: a zone written by another
 * layout starts afresh. */
#define NGX_HTTP_THROTTLE_LAYOUT 0x7468726f746c0005ULL

/* How a request's settle= ended, in a zone (nginx_throttle_settles_total):
 * the key charged more, given units back, or neither (the reservation was
 * right); the value not a count of units; the charge not kept (no room). */
typedef enum {
    NGX_HTTP_THROTTLE_SETTLE_CHARGED = 0,
    NGX_HTTP_THROTTLE_SETTLE_REFUNDED,
    NGX_HTTP_THROTTLE_SETTLE_EVEN,
    NGX_HTTP_THROTTLE_SETTLE_INVALID,
    NGX_HTTP_THROTTLE_SETTLE_LOST,
    NGX_HTTP_THROTTLE_SETTLE_RESULTS
} ngx_http_throttle_settle_e;

/*
 * A zone's figures for throttle_metrics (ngx_http_throttle_metrics.h
 * records them, _metrics.cpp reads them): the whole nginx's, since they
 * live in the zone's shared memory, and kept with the zone over a reload.
 * Counters are added to atomically (ngx_http_throttle_counter.h), without
 * the zone's lock. Gauges are written under the lock and read without it:
 * each is an aligned word, which x86_64 and arm64 never read torn.
 */
typedef struct {
    /* by the zone's own verdict (throttle::RequestDecision::verdict()) */
    ngx_atomic_t requests[throttle::kStatusCount];
    /* units charged; refused by this zone itself */
    ngx_atomic_t units_passed;
    ngx_atomic_t units_rejected;
    /* keys removed to make room: expired ones, and ones still limited */
    ngx_atomic_t evicted_drained;
    ngx_atomic_t evicted_live;
    /* strict: rejections made without Redis; requests that waited for
     * their key's script in flight */
    ngx_atomic_t denial_cache_hits;
    ngx_atomic_t flight_waits;
    /* settle=: requests by how their settle ended */
    ngx_atomic_t settles[NGX_HTTP_THROTTLE_SETTLE_RESULTS];
    /* async: rounds by how they ended; keys Redis answered about; units
     * evicted before they were synced */
    ngx_atomic_t sync_ok;
    ngx_atomic_t sync_failed;
    ngx_atomic_t sync_keys;
    ngx_atomic_t sync_lost_units;

    /* gauges: keys held (tags in the table) */
    ngx_uint_t keys;
    /* async: units charged and not sent to Redis yet; when the oldest unit
     * Redis has not taken yet was charged, and the first one since the
     * last round was taken (0: none) */
    int64_t pending_units;
    int64_t unsynced_since;
    int64_t charged_since_take;
} ngx_http_throttle_metrics_t;

/* A bucket of a zone's table: one cache line (throttle/table.hpp). */
typedef struct {
    uint64_t order;                       /* recency; slots reserved */
    uint64_t tag[throttle::kBucketSlots]; /* 0: an empty slot */
} ngx_http_throttle_bucket_t;

/* A zone's keys: a table of tags in buckets, each slot's words
 * (throttle::Policy::slot_words()) in an array beside them, made once with
 * the zone and kept with it over a reload. */
typedef struct {
    ngx_http_throttle_bucket_t *buckets;
    int64_t                    *slots; /* slot_words a slot, in order */
    ngx_uint_t                  nbuckets;
    ngx_uint_t                  width; /* slots a bucket uses, up to 7 */
    ngx_uint_t                  slot_words;
    ngx_uint_t                  sweep;  /* the next bucket a lookup sweeps */
    throttle::SipKey            secret; /* the keys' tags' */
} ngx_http_throttle_table_t;

/* The zone's bookkeeping in shared memory: its table, and in an async
 * zone the records of the keys due a sync, in the pages the table left. */
typedef struct {
    uint64_t                      layout; /* NGX_HTTP_THROTTLE_LAYOUT */
    ngx_http_throttle_table_t    *table;
    ngx_http_throttle_log_limit_t full_log; /* async: no room for records */
    ngx_http_throttle_log_limit_t evict_log;
    /* async mode */
    ngx_uint_t  syncs;        /* async now (a reload may end it) */
    ngx_queue_t dirty;        /* records of keys to sync, least recently charged
                               * first */
    int64_t    next_round;    /* when the next sync is due, us */
    ngx_pid_t  syncer;        /* the worker syncing now, or 0 */
    int64_t    syncer_until;  /* when its claim lapses, us */
    int64_t    dropped_units; /* evicted before they were synced */
    ngx_uint_t failing;       /* syncs failed in a row */
    ngx_http_throttle_metrics_t metrics;
    /* concurrent=: requests holding a place, by the process slot of the
     * worker that admitted them (ngx_process_slot: a worker respawned
     * after a crash takes its slot, and zeroes it); NULL in other zones */
    ngx_atomic_t *in_flight;
    /* strict: the keys' flights, by their tags (throttle::FlightEntry),
     * nflights of them (a power of two); NULL in a zone made in another
     * mode, which a reload to strict mode gives some if it has room */
    throttle::FlightEntry *flights;
    ngx_uint_t             nflights;
    /* the keys it rejected most, recently (throttle_api's top=) */
    throttle::TopTable *top;
} ngx_http_throttle_shctx_t;

/* An async key due a sync: a slab record, referred to by its slot
 * (throttle::Policy::slot_record()), that holds its units not yet sent and
 * the name the sync sends (a 16-byte key's takes 64 bytes), and where
 * rate= is a variable the rate of its latest request after the name
 * (throttle::pack_rate(), 4 bytes). It lives while the key has syncs due,
 * in the zone's "dirty" queue. */
typedef struct {
    ngx_queue_t            dirty;
    throttle::PendingUnits pending;
    uint64_t               tag;         /* its slot's */
    u_char                 len;         /* up to throttle::kMaxInlineKeyLen */
    u_char                 hashed;      /* data is a digest of a long key */
    u_char                 sync_rounds; /* syncs still due, 1 or more */
    u_char                 data[1];
} ngx_http_throttle_record_t;

/* A zone's most rejected keys as top= reads them (a copy): the entries
 * in the answer's order, `used` of them keys, of the `size` the table
 * has, which halve every decay_ms; when they were read. */
typedef struct {
    throttle::TopEntry *entries;
    ngx_uint_t          used;
    ngx_uint_t          size;
    int64_t             decay_ms;
    int64_t             now_ms;
} ngx_http_throttle_top_copy_t;

/* A throttle_zone: lives in the configuration cycle's pool. */
typedef struct {
    ngx_str_t                  name;
    ngx_http_throttle_value_t *key;
    throttle::Policy           policy; /* algorithm, rate, mode; where rate=
                                        * or burst= is a variable, the
                                        * template of its requests' */
    ngx_http_throttle_value_t *rate;   /* NULL: constant, in policy */
    ngx_http_throttle_value_t *burst;  /* NULL: constant, in policy */
    ngx_shm_zone_t            *shm_zone;
    ngx_http_throttle_shctx_t *sh;
    ngx_slab_pool_t           *shpool;
    ngx_str_t                  redis_name;
    ngx_http_throttle_redis_t *redis;
    ngx_str_t                  file; /* where throttle_zone is, for errors */
    ngx_uint_t                 line;
    /* this worker's */
    ngx_http_throttle_log_limit_t redis_log;
    ngx_http_throttle_log_limit_t settle_log;        /* bad settle= values */
    ngx_uint_t                    settles_in_flight; /* strict, to Redis */
    /* the policies of its requests' plans (NULL where none varies), and
     * the log of the values that make none */
    throttle::PlanCache          *plans;
    ngx_http_throttle_log_limit_t plan_log;
    /* strict: the checks of requests waiting for their key's flight */
    ngx_queue_t  flight_waiters;
    ngx_msec_t   renew_interval; /* concurrent= */
    ngx_msec_t   top_decay;      /* top_decay=: the top's counts halve */
    ngx_event_t *sync_timer;
} ngx_http_throttle_zone_t;

/* Strict zones are decided by Redis; local and async ones by the zone. */
static inline bool
ngx_http_throttle_strict(const ngx_http_throttle_zone_t *zone)
{
    return zone->policy.mode == throttle::Mode::strict;
}

static inline bool
ngx_http_throttle_async(const ngx_http_throttle_zone_t *zone)
{
    return zone->policy.mode == throttle::Mode::async;
}

/* A key's lookup in a zone, between its decision and its commit: what a
 * request's check holds of the zone's side. */
typedef struct {
    ngx_http_throttle_zone_t *zone; /* NULL: empty key, not limited */
    throttle::ZoneCheck      *part; /* its part in the request's decision */
    /* the request's policy: the zone's, or its plan's (docs/plans.md) */
    const throttle::Policy *policy;
    throttle::ZoneKey       key;
    int64_t                 now; /* of the zone's clock */
    /* what the zone holds of the key (NULL: nothing), and its words */
    throttle::StoredKey *stored;
    int64_t             *log;
    /* the key's tag, its slot and the slot reserved for it (or -1), and
     * its state, read from the slot (and an async key's record) */
    uint64_t            tag;
    ngx_int_t           slot;
    ngx_int_t           fresh_slot;
    throttle::StoredKey copy;
} ngx_http_throttle_lookup_t;

/* ngx_http_throttle_zone_conf.cpp */
char *ngx_http_throttle_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                       void *conf) noexcept;

/* ngx_http_throttle_plans.cpp: a request's policy in a zone */
const throttle::Policy *
ngx_http_throttle_plan(ngx_http_request_t *r, ngx_http_throttle_zone_t *zone,
                       throttle::Policy *storage) noexcept;

/* ngx_http_throttle_zone_init.cpp */
ngx_int_t ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone,
                                      void           *data) noexcept;

/* ngx_http_throttle_zone.cpp: the shared-memory zone, under its mutex */
void      ngx_http_throttle_lookup(ngx_http_throttle_lookup_t *check) noexcept;
ngx_int_t ngx_http_throttle_reserve(ngx_http_throttle_lookup_t *check,
                                    ngx_log_t                  *log) noexcept;
void      ngx_http_throttle_release(ngx_http_throttle_lookup_t *check) noexcept;
void      ngx_http_throttle_commit(ngx_http_throttle_lookup_t *check) noexcept;
void      ngx_http_throttle_remember(ngx_http_throttle_lookup_t *check,
                                     int64_t sent_at, ngx_log_t *log) noexcept;
void      ngx_http_throttle_forget_answers(ngx_http_throttle_lookup_t *check,
                                           ngx_msec_t timeout_ms) noexcept;
ngx_int_t ngx_http_throttle_settle_key(ngx_http_throttle_lookup_t *check,
                                       int64_t    reserved_units,
                                       int64_t    settled_units,
                                       int64_t    reserved_at,
                                       ngx_log_t *log) noexcept;
int64_t   ngx_http_throttle_reset_key(ngx_http_throttle_lookup_t *check,
                                      int64_t                     answered_by,
                                      ngx_log_t                  *log) noexcept;

/* ngx_http_throttle_zone_inflight.cpp: keys whose requests are out (a
 * strict key's flight, a concurrent= key's places), under the zone's mutex
 * but for land_flight() and renew_key(), which take it */
int64_t
ngx_http_throttle_flight_of(const ngx_http_throttle_lookup_t *check) noexcept;
void      ngx_http_throttle_take_flight(ngx_http_throttle_lookup_t *check,
                                        int64_t                     until) noexcept;
void      ngx_http_throttle_land_flight(ngx_http_throttle_lookup_t *check,
                                        int64_t until, bool failed) noexcept;
ngx_int_t ngx_http_throttle_flights_create(ngx_http_throttle_zone_t *zone,
                                           size_t zone_bytes) noexcept;
void ngx_http_throttle_flights_forget(ngx_http_throttle_zone_t *zone) noexcept;
int64_t ngx_http_throttle_renew_key(ngx_http_throttle_lookup_t *check,
                                    int64_t held_at) noexcept;

/* ngx_http_throttle_zone_top.cpp: the keys a zone rejected most, under
 * its mutex but for top_reload() and top_copy(), which take it */
size_t ngx_http_throttle_top_bytes(size_t zone_bytes) noexcept;
void   ngx_http_throttle_top_create(ngx_http_throttle_zone_t *zone,
                                    size_t zone_bytes, u_char *p) noexcept;
void   ngx_http_throttle_top_reload(ngx_http_throttle_zone_t *zone) noexcept;
void   ngx_http_throttle_top_record(ngx_http_throttle_lookup_t *check) noexcept;
ngx_int_t
ngx_http_throttle_top_copy(ngx_http_throttle_zone_t *zone, ngx_pool_t *pool,
                           ngx_http_throttle_top_copy_t *copy) noexcept;

/* ngx_http_throttle_table.cpp: a zone's table, under its mutex */
int64_t *ngx_http_throttle_slot_words(ngx_http_throttle_table_t *t,
                                      ngx_uint_t                 slot) noexcept;
void ngx_http_throttle_table_sweep(ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                                   int64_t now) noexcept;
void ngx_http_throttle_table_find(ngx_http_throttle_lookup_t *check) noexcept;
/* sweeps a little of the table, then finds the check's key */
void ngx_http_throttle_find(ngx_http_throttle_lookup_t *check) noexcept;
void ngx_http_throttle_table_reserve(ngx_http_throttle_lookup_t *check,
                                     ngx_log_t                  *log) noexcept;
void
ngx_http_throttle_table_release(ngx_http_throttle_lookup_t *check) noexcept;
throttle::StoredKey      *
ngx_http_throttle_table_take(ngx_http_throttle_lookup_t *check,
                                  ngx_log_t                  *log) noexcept;
void ngx_http_throttle_table_put(ngx_http_throttle_lookup_t *check) noexcept;
/* ngx_http_throttle_due.cpp: an async key's record keeps its units */
void ngx_http_throttle_due_keep(ngx_http_throttle_zone_t *zone, int64_t *words,
                                uint64_t tag, const throttle::ZoneKey &key,
                                const throttle::PendingUnits &pending,
                                uint32_t rate, int64_t now,
                                ngx_log_t *log) noexcept;
/* The words of the slot that holds `tag`, or NULL. */
int64_t *ngx_http_throttle_table_words(ngx_http_throttle_zone_t *zone,
                                       uint64_t                  tag) noexcept;
void ngx_http_throttle_table_evicted(ngx_http_throttle_zone_t *zone, bool live,
                                     const char *why, int64_t now,
                                     ngx_log_t *log) noexcept;
/* Empties the slot that holds `tag`, if any (a key evicted for want of
 * room for its record). */
void ngx_http_throttle_table_drop(ngx_http_throttle_zone_t *zone,
                                  uint64_t                  tag) noexcept;

/* ngx_http_throttle_records.cpp: an async zone's records of its keys due a
 * sync, under its mutex */
ngx_http_throttle_record_t           *
ngx_http_throttle_record_of(ngx_http_throttle_zone_t *zone,
                                      int64_t                  *words) noexcept;
void      ngx_http_throttle_record_load(ngx_http_throttle_zone_t *zone,
                                        int64_t                  *words,
                                        throttle::StoredKey      *key) noexcept;
ngx_int_t ngx_http_throttle_record_keep(ngx_http_throttle_zone_t *zone,
                                        int64_t *words, uint64_t tag,
                                        const throttle::ZoneKey      &key,
                                        const throttle::PendingUnits &pending,
                                        uint32_t rate, int64_t now,
                                        ngx_log_t *log) noexcept;
uint32_t
     ngx_http_throttle_record_rate(ngx_http_throttle_zone_t   *zone,
                                   ngx_http_throttle_record_t *rec) noexcept;
void ngx_http_throttle_record_drop(ngx_http_throttle_zone_t *zone,
                                   int64_t                  *words) noexcept;
void ngx_http_throttle_record_lose(ngx_http_throttle_zone_t     *zone,
                                   const throttle::PendingUnits &pending,
                                   int64_t now, ngx_log_t *log) noexcept;
void ngx_http_throttle_record_lost(ngx_http_throttle_zone_t *zone,
                                   int64_t                   units) noexcept;
/* `words`: the slot's words (ngx_http_throttle_table_words()), or NULL */
void ngx_http_throttle_record_done(ngx_http_throttle_zone_t   *zone,
                                   ngx_http_throttle_record_t *rec,
                                   int64_t                    *words) noexcept;

/* The slot's record goes, with its units not sent yet: how many. */
int64_t ngx_http_throttle_record_remove(ngx_http_throttle_zone_t *zone,
                                        int64_t *words) noexcept;

/* ngx_http_throttle_async.cpp */
ngx_int_t
ngx_http_throttle_async_init_worker(ngx_cycle_t              *cycle,
                                    ngx_http_throttle_zone_t *zone) noexcept;

#endif /* NGX_HTTP_THROTTLE_ZONE_H */
