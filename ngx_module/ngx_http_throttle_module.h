/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ngx_http_throttle_module: the types the glue files share, and what each
 * file offers the others. docs/architecture.md walks a request through
 * them.
 *
 * The glue is compiled as C++ by nginx's own build. nginx headers stay
 * inside extern "C"; every function nginx calls is noexcept, and nothing
 * stored in shared memory or pools has a destructor. The glue reaches the
 * algorithms only through a zone's throttle::Policy.
 */

#ifndef NGX_HTTP_THROTTLE_MODULE_H
#define NGX_HTTP_THROTTLE_MODULE_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include "ngx_http_throttle_log.h"
#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_redis.h"

#include "throttle/key.hpp"
#include "throttle/policy.hpp"
#include "throttle/request.hpp"
#include "throttle/result.hpp"

extern "C" ngx_module_t ngx_http_throttle_module;

/* The module's version: logged at each configuration load, reported by
 * throttle_metrics (build_info), and the upstream version of the Debian
 * package (debian/changelog; its build checks that they agree). */
#define NGX_HTTP_THROTTLE_VERSION "0.1.0"

/* When a "throttle" line decides (phase=): in the preaccess phase, as
 * limit_req, or once the access phase has let the request in (nginx's
 * precontent phase), when the key comes from authentication. */
#define NGX_HTTP_THROTTLE_PREACCESS 0
#define NGX_HTTP_THROTTLE_AUTHORIZED 1
#define NGX_HTTP_THROTTLE_NPHASES 2

/* throttle_headers */
#define NGX_HTTP_THROTTLE_HEADERS_OFF 0
#define NGX_HTTP_THROTTLE_HEADERS_ON 1
#define NGX_HTTP_THROTTLE_HEADERS_LEGACY 2

/* throttle_on_error */
#define NGX_HTTP_THROTTLE_ON_ERROR_ALLOW 0
#define NGX_HTTP_THROTTLE_ON_ERROR_DENY 1

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
    /* strict: rejections made without Redis */
    ngx_atomic_t denial_cache_hits;
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
    ngx_event_t                  *sync_timer;
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

/* One "throttle" line of a location. */
typedef struct {
    ngx_shm_zone_t           *shm_zone;
    ngx_http_complex_value_t *cost; /* NULL: cost_value is constant */
    int64_t                   cost_value;
    int64_t                   delay_units; /* delay=, or throttle::kNoDelay */
} ngx_http_throttle_limit_t;

/* Where a "throttle" or "throttle_api" line named a zone, to report one
 * never defined, or one that cannot take the delay= asked of it. */
typedef struct {
    ngx_shm_zone_t *shm_zone;
    const char     *directive;
    int64_t         delay_units; /* throttle::kNoDelay: none */
    ngx_str_t       file;
    ngx_uint_t      line;
} ngx_http_throttle_zone_ref_t;

typedef struct {
    ngx_array_t redis;      /* of ngx_http_throttle_redis_t *, defined */
    ngx_array_t zones;      /* of ngx_http_throttle_zone_t *, defined */
    ngx_array_t zone_refs;  /* of ngx_http_throttle_zone_ref_t, used */
    ngx_flag_t  authorized; /* a "throttle" line has phase=authorized */
} ngx_http_throttle_main_conf_t;

typedef struct {
    /* of ngx_http_throttle_limit_t per phase, each sorted by zone name */
    ngx_array_t *limits[NGX_HTTP_THROTTLE_NPHASES];
    ngx_uint_t   status;
    ngx_uint_t   headers;
    ngx_flag_t   dry_run;
    ngx_uint_t   log_level;
    ngx_uint_t   on_error;
    /* throttle_api: the zones it may ask, of ngx_shm_zone_t *; not
     * inherited (the location's content handler) */
    ngx_array_t *api_zones;
} ngx_http_throttle_loc_conf_t;

typedef struct ngx_http_throttle_ctx_s ngx_http_throttle_ctx_t;

/* A check's zone side: its key's node between lookup and commit, and its
 * Redis call; the decision's side is its part (throttle::ZoneCheck). */
typedef struct {
    ngx_http_throttle_zone_t *zone; /* NULL: empty key, not limited */
    throttle::ZoneCheck      *part;
    throttle::ZoneKey         key;
    ngx_http_throttle_node_t *node;  /* existing node, or NULL */
    ngx_http_throttle_node_t *fresh; /* allocated, not yet inserted */
    uint32_t                  hash;
    int64_t                   now; /* of the zone's clock */
    /* strict mode */
    ngx_http_throttle_ctx_t       *ctx;
    ngx_str_t                      redis_key;
    ngx_http_throttle_redis_cmd_t *cmd;       /* in flight */
    int64_t                        sent_at;   /* the zone's clock, us */
    int64_t                        tokens[2]; /* the charge, for a refund */
} ngx_http_throttle_check_t;

/* Where a phase's decision stands each time nginx runs the phases
 * (ngx_http_throttle_handler.cpp). */
typedef enum {
    NGX_HTTP_THROTTLE_NOT_STARTED = 0, /* the first time */
    NGX_HTTP_THROTTLE_WAITING,         /* for Redis, or for the delay to pass */
    NGX_HTTP_THROTTLE_RESUMING, /* done waiting: the handler returns rc */
    NGX_HTTP_THROTTLE_DONE      /* decided: a request counts once */
} ngx_http_throttle_state_e;

/* A phase's decision about a request, kept for the whole main request. */
struct ngx_http_throttle_ctx_s {
    ngx_uint_t                    phase;
    throttle::RequestDecision     decision;
    ngx_http_request_t           *request;
    ngx_http_throttle_loc_conf_t *tlcf; /* of the location that decided */
    ngx_http_throttle_check_t    *checks;
    ngx_uint_t                    nchecks;
    ngx_http_throttle_state_e     state;
    /* while Redis answers, or the request waits */
    ngx_uint_t replies_awaited;
    ngx_int_t  rc; /* for the resumed handler */

    /* called once every reply is in; NULL: ngx_http_throttle_resume(),
     * which runs the phases again */
    void (*resume_handler)(ngx_http_throttle_ctx_t *ctx);
    void *data; /* the resume handler's */
};

/* $throttle_status of a phase: none until it has decided. */
static inline throttle::Status
ngx_http_throttle_status(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    return ctx->decision.outcome().status;
}

/* The zone whose answer the client gets, or NULL if none decided. */
static inline ngx_http_throttle_zone_t *
ngx_http_throttle_binding(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    int binding = ctx->decision.outcome().binding;

    return binding < 0 ? NULL : ctx->checks[binding].zone;
}

static inline throttle::Answer
ngx_http_throttle_phase_answer(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    return {ngx_http_throttle_status(ctx),
            ngx_http_throttle_binding(ctx) ? &ctx->decision.outcome().result
                                           : nullptr};
}

/* A status's name ($throttle_status, the API's "status"). */
static inline ngx_str_t
ngx_http_throttle_status_name(throttle::Status status) noexcept
{
    std::string_view name = throttle::status_info(status).name;

    return {name.size(), (u_char *) name.data()};
}

/* The module's context of a main request: a decision per phase, and the
 * one a throttle_api location made for the caller's checks. */
typedef struct {
    ngx_http_throttle_ctx_t phases[NGX_HTTP_THROTTLE_NPHASES];
    ngx_http_throttle_ctx_t api;
} ngx_http_throttle_request_ctx_t;

/* A check given to the decision as it is (throttle_api), not evaluated
 * from a "throttle" line. */
typedef struct {
    ngx_http_throttle_zone_t *zone;
    ngx_str_t                 key; /* not empty */
    int64_t                   cost;
    int64_t                   delay_units; /* throttle::kNoDelay: none */
} ngx_http_throttle_given_t;

/* ngx_http_throttle_zone_conf.cpp */
char *ngx_http_throttle_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                       void *conf) noexcept;

/* ngx_http_throttle_loc_conf.cpp */
char *ngx_http_throttle_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                  void *conf) noexcept;
char *ngx_http_throttle_set_enum(ngx_conf_t *cf, ngx_command_t *cmd,
                                 void *conf) noexcept;
char *ngx_http_throttle_set_status(ngx_conf_t *cf, ngx_command_t *cmd,
                                   void *conf) noexcept;
char *ngx_http_throttle_zone_ref(ngx_conf_t *cf, ngx_shm_zone_t *shm_zone,
                                 const char *directive,
                                 int64_t     delay_units) noexcept;

/* ngx_http_throttle_zone_init.cpp */
ngx_int_t ngx_http_throttle_init_zone(ngx_shm_zone_t *shm_zone,
                                      void           *data) noexcept;

/* ngx_http_throttle_zone.cpp: the shared-memory zone, under its mutex */
size_t ngx_http_throttle_node_size(const ngx_http_throttle_zone_t *zone,
                                   size_t key_len) noexcept;
void
          ngx_http_throttle_rbtree_insert_value(ngx_rbtree_node_t *temp,
                                                ngx_rbtree_node_t *node,
                                                ngx_rbtree_node_t *sentinel) noexcept;
void      ngx_http_throttle_lookup(ngx_http_throttle_check_t *check) noexcept;
ngx_int_t ngx_http_throttle_reserve(ngx_http_throttle_check_t *check,
                                    ngx_log_t                 *log) noexcept;
void      ngx_http_throttle_release(ngx_http_throttle_check_t *check) noexcept;
void      ngx_http_throttle_commit(ngx_http_throttle_check_t *check) noexcept;
void      ngx_http_throttle_remember(ngx_http_throttle_check_t *check,
                                     ngx_log_t                 *log) noexcept;
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

/* ngx_http_throttle_decide.cpp: the decision over a request's zones */
ngx_int_t ngx_http_throttle_start(ngx_http_request_t      *r,
                                  ngx_http_throttle_ctx_t *ctx) noexcept;
ngx_int_t ngx_http_throttle_start_given(ngx_http_request_t              *r,
                                        ngx_http_throttle_ctx_t         *ctx,
                                        const ngx_http_throttle_given_t *given,
                                        ngx_uint_t n) noexcept;
ngx_int_t ngx_http_throttle_complete(ngx_http_throttle_ctx_t *ctx) noexcept;
const ngx_http_throttle_ctx_t *
ngx_http_throttle_answer(ngx_http_request_t *r) noexcept;

/* ngx_http_throttle_handler.cpp: the phase handlers */
ngx_int_t ngx_http_throttle_preaccess_handler(ngx_http_request_t *r) noexcept;
ngx_int_t ngx_http_throttle_authorized_handler(ngx_http_request_t *r) noexcept;
ngx_http_throttle_request_ctx_t *
ngx_http_throttle_get_ctx(ngx_http_request_t *r) noexcept;
ngx_http_throttle_request_ctx_t      *
ngx_http_throttle_create_ctx(ngx_http_request_t *r) noexcept;
void ngx_http_throttle_resume(ngx_http_throttle_ctx_t *ctx) noexcept;

/* ngx_http_throttle_strict.cpp */
ngx_uint_t ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept;
void ngx_http_throttle_strict_settle(ngx_http_throttle_ctx_t *ctx) noexcept;

/* ngx_http_throttle_async.cpp */
ngx_int_t
ngx_http_throttle_async_init_worker(ngx_cycle_t              *cycle,
                                    ngx_http_throttle_zone_t *zone) noexcept;

/* ngx_http_throttle_filter.cpp */
ngx_int_t ngx_http_throttle_filter_init(ngx_conf_t *cf) noexcept;
ngx_int_t ngx_http_throttle_add_header(ngx_http_request_t *r, ngx_str_t name,
                                       u_char *value, size_t len) noexcept;
ngx_int_t ngx_http_throttle_send(ngx_http_request_t *r, ngx_uint_t status,
                                 ngx_buf_t *b) noexcept;

/* ngx_http_throttle_metrics.cpp */
char *ngx_http_throttle_metrics_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                          void *conf) noexcept;

/* ngx_http_throttle_api.cpp */
char *ngx_http_throttle_api_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                      void *conf) noexcept;

/* ngx_http_throttle_variables.cpp */
ngx_int_t ngx_http_throttle_add_variables(ngx_conf_t *cf) noexcept;

#endif /* NGX_HTTP_THROTTLE_MODULE_H */
