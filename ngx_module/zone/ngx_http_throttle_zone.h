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
#include "throttle/policy.hpp"
#include "throttle/request.hpp"

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

    /* gauges: nodes in the tree */
    ngx_uint_t keys;
    /* async: units charged and not sent to Redis yet; when the oldest unit
     * Redis has not taken yet was charged, and the first one since the
     * last round was taken (0: none) */
    int64_t pending_units;
    int64_t unsynced_since;
    int64_t charged_since_take;
} ngx_http_throttle_metrics_t;

/* The zone's bookkeeping in shared memory: keys by hash, and by recency. */
typedef struct {
    ngx_rbtree_t                  rbtree;
    ngx_rbtree_node_t             sentinel;
    ngx_queue_t                   queue; /* most recently used first */
    ngx_http_throttle_log_limit_t full_log;
    ngx_http_throttle_log_limit_t evict_log;
    /* async mode */
    ngx_queue_t dirty;         /* keys to sync, oldest first */
    int64_t     next_round;    /* when the next sync is due, us */
    ngx_pid_t   syncer;        /* the worker syncing now, or 0 */
    int64_t     syncer_until;  /* when its claim lapses, us */
    int64_t     dropped_units; /* evicted before they were synced */
    ngx_uint_t  failing;       /* syncs failed in a row */
    ngx_http_throttle_metrics_t metrics;
    /* concurrent=: requests holding a place, by the process slot of the
     * worker that admitted them (ngx_process_slot: a worker respawned
     * after a crash takes its slot, and zeroes it); NULL in other zones */
    ngx_atomic_t *in_flight;
} ngx_http_throttle_shctx_t;

/* One key in the zone. Starts at ngx_rbtree_node_t.color, as limit_req's;
 * the words of a key's log (throttle::Policy::log_slots) follow its data. */
typedef struct {
    u_char              color;
    u_char              hashed; /* data is a digest of a long key */
    u_short             len;
    u_char              sync_rounds; /* async: syncs still due (in "dirty") */
    ngx_queue_t         queue;
    ngx_queue_t         dirty;
    throttle::StoredKey stored;
    u_char              data[1];
} ngx_http_throttle_node_t;

/* A throttle_zone: lives in the configuration cycle's pool. */
typedef struct {
    ngx_str_t                  name;
    ngx_http_complex_value_t   key;
    throttle::Policy           policy; /* algorithm, rate, mode */
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
    /* strict: the checks of requests waiting for their key's flight */
    ngx_queue_t  flight_waiters;
    ngx_msec_t   renew_interval; /* concurrent= */
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
    throttle::ZoneKey         key;
    ngx_http_throttle_node_t *node;  /* existing node, or NULL */
    ngx_http_throttle_node_t *fresh; /* allocated, not yet inserted */
    uint32_t                  hash;
    int64_t                   now; /* of the zone's clock */
} ngx_http_throttle_lookup_t;

/* ngx_http_throttle_zone_conf.cpp */
char *ngx_http_throttle_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                       void *conf) noexcept;

/* ngx_http_throttle_zone_init.cpp */
ngx_int_t ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone,
                                      void           *data) noexcept;

/* ngx_http_throttle_zone.cpp: the shared-memory zone, under its mutex
 * (and ngx_http_throttle_zone_inflight.cpp: keys whose requests are out) */
size_t ngx_http_throttle_node_size(const ngx_http_throttle_zone_t *zone,
                                   size_t key_len) noexcept;
void
          ngx_http_throttle_rbtree_insert_value(ngx_rbtree_node_t *temp,
                                                ngx_rbtree_node_t *node,
                                                ngx_rbtree_node_t *sentinel) noexcept;
void      ngx_http_throttle_lookup(ngx_http_throttle_lookup_t *check) noexcept;
ngx_int_t ngx_http_throttle_reserve(ngx_http_throttle_lookup_t *check,
                                    ngx_log_t                  *log) noexcept;
void      ngx_http_throttle_release(ngx_http_throttle_lookup_t *check) noexcept;
void      ngx_http_throttle_commit(ngx_http_throttle_lookup_t *check) noexcept;
void      ngx_http_throttle_remember(ngx_http_throttle_lookup_t *check,
                                     int64_t sent_at, ngx_log_t *log) noexcept;
void      ngx_http_throttle_take_flight(ngx_http_throttle_lookup_t *check,
                                        int64_t                     until) noexcept;
void      ngx_http_throttle_land_flight(ngx_http_throttle_lookup_t *check,
                                        int64_t                     until) noexcept;
void      ngx_http_throttle_forget_answers(ngx_http_throttle_lookup_t *check,
                                           ngx_msec_t timeout_ms) noexcept;
ngx_int_t ngx_http_throttle_settle_key(ngx_http_throttle_lookup_t *check,
                                       int64_t    reserved_units,
                                       int64_t    settled_units,
                                       int64_t    reserved_at,
                                       ngx_log_t *log) noexcept;
int64_t   ngx_http_throttle_renew_key(ngx_http_throttle_lookup_t *check,
                                      int64_t held_at) noexcept;
void      ngx_http_throttle_find(ngx_http_throttle_lookup_t *check) noexcept;
/* A key's words beside its state (throttle::Policy::log_slots). */
int64_t *ngx_http_throttle_node_log(ngx_http_throttle_node_t *tn) noexcept;
/* A key's hash in the tree, computed once per lookup. */
uint32_t ngx_http_throttle_key_hash(const u_char *data, size_t len) noexcept;
ngx_http_throttle_node_t *
ngx_http_throttle_find_node(ngx_http_throttle_zone_t *zone, const u_char *data,
                            size_t len, ngx_uint_t hashed,
                            uint32_t hash) noexcept;
void ngx_http_throttle_expire(ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                              int64_t now) noexcept;
void ngx_http_throttle_mark_dirty(ngx_http_throttle_zone_t *zone,
                                  ngx_http_throttle_node_t *tn) noexcept;

/* ngx_http_throttle_async.cpp */
ngx_int_t
ngx_http_throttle_async_init_worker(ngx_cycle_t              *cycle,
                                    ngx_http_throttle_zone_t *zone) noexcept;

#endif /* NGX_HTTP_THROTTLE_ZONE_H */
