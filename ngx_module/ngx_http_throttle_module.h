/*
 * ngx_http_throttle_module: types shared by the glue files.
 *
 * The glue is compiled as C++ by nginx's own build. nginx headers stay
 * inside extern "C"; every function nginx calls is noexcept, and nothing
 * stored in shared memory or pools has a destructor.
 */

#ifndef NGX_HTTP_THROTTLE_MODULE_H
#define NGX_HTTP_THROTTLE_MODULE_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include "ngx_http_throttle_redis.h"

#include "throttle/clock.hpp"
#include "throttle/denial.hpp"
#include "throttle/key.hpp"
#include "throttle/policy.hpp"
#include "throttle/result.hpp"
#include "throttle/window_sync.hpp"

extern "C" ngx_module_t ngx_http_throttle_module;

/* $throttle_status values */
enum ngx_http_throttle_status_e {
    NGX_HTTP_THROTTLE_NONE = 0,
    NGX_HTTP_THROTTLE_PASSED,
    NGX_HTTP_THROTTLE_REJECTED,
    NGX_HTTP_THROTTLE_REJECTED_DRY_RUN,
    NGX_HTTP_THROTTLE_ERROR_ALLOWED,
    NGX_HTTP_THROTTLE_ERROR_DENIED
};

/* throttle_headers */
#define NGX_HTTP_THROTTLE_HEADERS_OFF 0
#define NGX_HTTP_THROTTLE_HEADERS_ON 1
#define NGX_HTTP_THROTTLE_HEADERS_LEGACY 2

/* throttle_on_error */
#define NGX_HTTP_THROTTLE_ON_ERROR_ALLOW 0
#define NGX_HTTP_THROTTLE_ON_ERROR_DENY 1

/* The zone's bookkeeping in shared memory: keys by hash, and by recency. */
typedef struct {
    ngx_rbtree_t      rbtree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t       queue;        /* most recently used first */
    int64_t           full_logged;  /* last "zone is full" log, us */
    int64_t           evict_logged; /* last "evicting live keys" log, us */
    /* async mode */
    ngx_queue_t dirty;         /* keys to sync, oldest first */
    int64_t     flush_at;      /* next sync, us */
    ngx_pid_t   flusher;       /* the worker syncing now, or 0 */
    int64_t     flusher_until; /* when its claim lapses, us */
    int64_t     dropped_units; /* evicted before they were synced */
    ngx_uint_t  failing;       /* syncs failed in a row */
} ngx_http_throttle_shctx_t;

/* One key's state. Starts at ngx_rbtree_node_t.color, as limit_req's. */
typedef struct {
    u_char      color;
    u_char      hashed; /* data is a digest of a long key */
    u_short     len;
    u_char      sync_rounds; /* async: syncs still due (in "dirty") */
    ngx_queue_t queue;
    ngx_queue_t dirty;
    int64_t     expire_at; /* us of the zone's clock; stale after */
    /* async: units charged since the last sync, and when the first was
     * (GCRA); or, packed, those of the window starting at pending_since
     * and of the one before (the window counters) */
    int64_t pending;
    int64_t pending_since;
    /* the algorithm's (throttle/decision.hpp), in the zone's clock; a
     * strict zone keeps its denial cache here instead */
    throttle::KeyState state;
    u_char             data[1]; /* the key; a sliding_log's ring follows */
} ngx_http_throttle_node_t;

/* Where a zone's state lives: throttle_zone's redis= and sync= */
#define NGX_HTTP_THROTTLE_SYNC_LOCAL 0
#define NGX_HTTP_THROTTLE_SYNC_STRICT 1
#define NGX_HTTP_THROTTLE_SYNC_ASYNC 2

/* A throttle_zone: lives in the configuration cycle's pool. */
typedef struct {
    ngx_str_t                  name;
    ngx_http_complex_value_t   key;
    throttle::Policy           policy;
    ngx_shm_zone_t            *shm_zone;
    ngx_http_throttle_shctx_t *sh;
    ngx_slab_pool_t           *shpool;
    /* strict mode: Redis decides, the shm zone caches its denials;
     * async mode: the shm zone decides, and syncs with Redis */
    ngx_uint_t                 sync;
    ngx_msec_t                 sync_interval;
    ngx_str_t                  redis_name;
    ngx_str_t                  file; /* where throttle_zone is, for errors */
    ngx_uint_t                 line;
    ngx_http_throttle_redis_t *redis;
    ngx_msec_t                 error_logged_at; /* this worker's */
    ngx_event_t               *flush_timer;     /* this worker's */
} ngx_http_throttle_zone_t;

/* The zone's clock: every time stored in its shared memory is of it. */
static inline int64_t
ngx_http_throttle_now(const ngx_http_throttle_zone_t *zone)
{
    return zone->policy.wall_clock() ? throttle::realtime_now_us()
                                     : throttle::monotonic_now_us();
}

/* Strict zones are decided by Redis; local and async ones by the zone. */
static inline bool
ngx_http_throttle_strict(const ngx_http_throttle_zone_t *zone)
{
    return zone->sync == NGX_HTTP_THROTTLE_SYNC_STRICT;
}

/* One "throttle" line of a location. */
typedef struct {
    ngx_shm_zone_t           *shm_zone;
    ngx_http_complex_value_t *cost; /* NULL: cost_value is constant */
    int64_t                   cost_value;
} ngx_http_throttle_limit_t;

typedef struct {
    ngx_shm_zone_t *shm_zone;
    ngx_str_t       file;
    ngx_uint_t      line;
} ngx_http_throttle_zone_ref_t;

typedef struct {
    ngx_array_t redis;     /* of ngx_http_throttle_redis_t * */
    ngx_array_t zones;     /* of ngx_http_throttle_zone_t *, defined */
    ngx_array_t zone_refs; /* of ngx_http_throttle_zone_ref_t, used */
} ngx_http_throttle_main_conf_t;

typedef struct {
    ngx_array_t *limits; /* sorted by zone name */
    ngx_uint_t   status;
    ngx_uint_t   headers;
    ngx_flag_t   dry_run;
    ngx_uint_t   log_level;
    ngx_uint_t   on_error;
} ngx_http_throttle_loc_conf_t;

typedef struct ngx_http_throttle_ctx_s ngx_http_throttle_ctx_t;

/* One zone's part in a decision, between lookup and commit. */
typedef struct {
    ngx_http_throttle_zone_t *zone; /* NULL: empty key, not limited */
    throttle::ZoneKey         key;
    int64_t                   cost;
    ngx_http_throttle_node_t *node;  /* existing node, or NULL */
    ngx_http_throttle_node_t *fresh; /* allocated, not yet inserted */
    uint32_t                  hash;
    int64_t                   now; /* of the zone's clock */
    throttle::Decision        decision;
    /* strict mode */
    ngx_http_throttle_ctx_t       *ctx;
    ngx_str_t                      redis_key;
    ngx_http_throttle_redis_cmd_t *cmd;       /* in flight */
    int64_t                        sent_at;   /* the zone's clock, us */
    int64_t                        tokens[2]; /* the charge, for a refund */
    unsigned                       failed : 1;
} ngx_http_throttle_check_t;

/* The decision about a request, kept for the whole main request. */
struct ngx_http_throttle_ctx_s {
    ngx_uint_t                status;  /* ngx_http_throttle_status_e */
    ngx_uint_t                headers; /* throttle_headers in force */
    ngx_http_throttle_zone_t *zone;    /* binding zone, or NULL */
    throttle::ThrottleResult  result;  /* binding zone's answer */
    /* while Redis answers */
    ngx_http_request_t           *request;
    ngx_http_throttle_loc_conf_t *tlcf;
    ngx_http_throttle_check_t    *checks;
    ngx_uint_t                    nchecks;
    ngx_uint_t                    pending; /* replies awaited */
    ngx_int_t                     rc;      /* for the resumed handler */
    unsigned                      waiting : 1;
    unsigned                      resume : 1;
};

/* ngx_http_throttle_zone.cpp */
ngx_int_t ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone,
                                      void           *data) noexcept;
void      ngx_http_throttle_lookup(ngx_http_throttle_check_t *check,
                                   int64_t                    now) noexcept;
ngx_int_t ngx_http_throttle_reserve(ngx_http_throttle_check_t *check,
                                    int64_t now, ngx_log_t *log) noexcept;
void      ngx_http_throttle_release(ngx_http_throttle_check_t *check) noexcept;
void      ngx_http_throttle_cache_denial(ngx_http_throttle_check_t *check,
                                         const throttle::KeyState  &state,
                                         int64_t expire_at, int64_t now,
                                         ngx_log_t *log) noexcept;
void      ngx_http_throttle_commit(ngx_http_throttle_check_t *check,
                                   int64_t                    now) noexcept;

/* ngx_http_throttle_handler.cpp */
ngx_int_t ngx_http_throttle_handler(ngx_http_request_t *r) noexcept;
ngx_http_throttle_ctx_t *
ngx_http_throttle_get_ctx(ngx_http_request_t *r) noexcept;

void ngx_http_throttle_resume(ngx_http_throttle_ctx_t *ctx) noexcept;

/* ngx_http_throttle_zone.cpp, for async mode */
ngx_http_throttle_node_t *
ngx_http_throttle_find_node(ngx_http_throttle_zone_t *zone, const u_char *data,
                            size_t len, ngx_uint_t hashed) noexcept;
void ngx_http_throttle_expire(ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                              int64_t now) noexcept;
void ngx_http_throttle_mark_dirty(ngx_http_throttle_zone_t *zone,
                                  ngx_http_throttle_node_t *tn) noexcept;

/* ngx_http_throttle_async.cpp */
ngx_int_t
ngx_http_throttle_async_init_worker(ngx_cycle_t              *cycle,
                                    ngx_http_throttle_zone_t *zone) noexcept;

/* ngx_http_throttle_strict.cpp */
ngx_uint_t ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept;
void       ngx_http_throttle_strict_settle(ngx_http_throttle_ctx_t *ctx,
                                           bool admitted) noexcept;

/* ngx_http_throttle_filter.cpp */
ngx_int_t ngx_http_throttle_filter_init(ngx_conf_t *cf) noexcept;

/* ngx_http_throttle_variables.cpp */
ngx_int_t ngx_http_throttle_add_variables(ngx_conf_t *cf) noexcept;

#endif /* NGX_HTTP_THROTTLE_MODULE_H */
