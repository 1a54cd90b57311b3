/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A request's way through the module: its checks of the zones, a phase's
 * decision and its state, the request's context, and what the request
 * path's files offer each other and the endpoints.
 */

#ifndef NGX_HTTP_THROTTLE_REQUEST_H
#define NGX_HTTP_THROTTLE_REQUEST_H

#include "ngx_http_throttle_redis.h"
#include "ngx_http_throttle_zone.h"

#include "throttle/request.hpp"
#include "throttle/result.hpp"

/* One "throttle" line of a location. */
typedef struct {
    ngx_shm_zone_t            *shm_zone;
    ngx_http_throttle_value_t *cost; /* NULL: cost_value is constant */
    int64_t                    cost_value;
    int64_t                    delay_units; /* delay=, or throttle::kNoDelay */
    ngx_http_throttle_value_t *settle;      /* settle=, NULL: none */
} ngx_http_throttle_limit_t;

typedef struct ngx_http_throttle_ctx_s   ngx_http_throttle_ctx_t;
typedef struct ngx_http_throttle_place_s ngx_http_throttle_place_t;

/* One zone's check of a request: its key's lookup in the zone, and its
 * Redis call; the decision's side is lookup.part (throttle::ZoneCheck). */
typedef struct {
    ngx_http_throttle_lookup_t lookup;
    /* the request's own policy, where the zone's rate= or burst= is a
     * variable (lookup.policy then points here) */
    throttle::Policy           plan;
    ngx_http_throttle_value_t *settle; /* its line's settle=, or NULL */
    /* strict mode */
    ngx_http_throttle_ctx_t       *ctx;
    ngx_str_t                      redis_key;
    ngx_http_throttle_redis_cmd_t *cmd;       /* in flight */
    int64_t                        sent_at;   /* the zone's clock, us */
    int64_t                        tokens[2]; /* the charge, for a refund */
    int64_t    flight; /* the key's flight it took: when it times out */
    ngx_uint_t locked; /* its zone is locked in this pass */
    ngx_uint_t topped; /* its zone's top counts its rejection */
    /* in its zone's flight_waiters while it waits for its key's flight
     * (next is NULL when not) */
    ngx_queue_t flight_link;
    /* concurrent=: the place the request holds, NULL if none */
    ngx_http_throttle_place_t *place;
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
    /* while it waits for a flight's answer */
    ngx_event_t *flight_timer;
    /* when it began to wait, on the clock of the flights' times (not
     * ngx_current_msec, which lags them by up to an event loop's turn:
     * its wait would end before the flight it waited for had timed out) */
    int64_t flight_since_us;

    /* called once every reply is in: the phase handler's runs the phases
     * again, throttle_api's answers the call */
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

    return binding < 0 ? NULL : ctx->checks[binding].lookup.zone;
}

/* The binding zone's policy for this request (its plan's, where rate= or
 * burst= is a variable), or NULL if none decided. */
static inline const throttle::Policy *
ngx_http_throttle_binding_policy(const ngx_http_throttle_ctx_t *ctx) noexcept
{
    int binding = ctx->decision.outcome().binding;

    return binding < 0 ? NULL : ctx->checks[binding].lookup.policy;
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
    /* $throttle_settled: the units the answer's zone was charged in the
     * end, once the request ended (-1: none settled) */
    int64_t settled_units;
} ngx_http_throttle_request_ctx_t;

/* A check given to the decision as it is (throttle_api), not evaluated
 * from a "throttle" line. */
typedef struct {
    ngx_http_throttle_zone_t *zone;
    ngx_str_t                 key; /* not empty */
    int64_t                   cost;
    int64_t                   delay_units; /* throttle::kNoDelay: none */
} ngx_http_throttle_given_t;

/* ngx_http_throttle_loc_conf.cpp */
char *ngx_http_throttle_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                  void *conf) noexcept;
char *ngx_http_throttle_set_enum(ngx_conf_t *cf, ngx_command_t *cmd,
                                 void *conf) noexcept;
char *ngx_http_throttle_set_status(ngx_conf_t *cf, ngx_command_t *cmd,
                                   void *conf) noexcept;
ngx_http_throttle_zone_ref_t *
ngx_http_throttle_zone_ref(ngx_conf_t *cf, ngx_shm_zone_t *shm_zone,
                           const char *directive) noexcept;

/* ngx_http_throttle_start.cpp: a decision's checks made, and begun */
ngx_int_t ngx_http_throttle_start(ngx_http_request_t      *r,
                                  ngx_http_throttle_ctx_t *ctx) noexcept;
ngx_int_t ngx_http_throttle_start_given(ngx_http_request_t              *r,
                                        ngx_http_throttle_ctx_t         *ctx,
                                        const ngx_http_throttle_given_t *given,
                                        ngx_uint_t n) noexcept;

/* ngx_http_throttle_decide.cpp: the decision over a request's zones */
ngx_int_t ngx_http_throttle_proceed(ngx_http_throttle_ctx_t *ctx) noexcept;
ngx_int_t ngx_http_throttle_conclude(ngx_http_throttle_ctx_t *ctx) noexcept;
ngx_int_t ngx_http_throttle_complete(ngx_http_throttle_ctx_t *ctx) noexcept;

/* ngx_http_throttle_request.cpp: the request's context */
ngx_http_throttle_request_ctx_t *
ngx_http_throttle_get_ctx(ngx_http_request_t *r) noexcept;
ngx_http_throttle_request_ctx_t *
ngx_http_throttle_create_ctx(ngx_http_request_t *r) noexcept;
const ngx_http_throttle_ctx_t *
ngx_http_throttle_answer(ngx_http_request_t *r) noexcept;

/* ngx_http_throttle_handler.cpp: the phase handlers */
ngx_int_t ngx_http_throttle_preaccess_handler(ngx_http_request_t *r) noexcept;
ngx_int_t ngx_http_throttle_authorized_handler(ngx_http_request_t *r) noexcept;

/* ngx_http_throttle_strict.cpp */
ngx_uint_t ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept;
void ngx_http_throttle_strict_follow_up(ngx_http_throttle_ctx_t *ctx) noexcept;
ngx_int_t ngx_http_throttle_strict_settle(ngx_http_request_t        *r,
                                          ngx_http_throttle_check_t *check,
                                          int64_t delta_units) noexcept;
ngx_http_throttle_redis_cmd_t *ngx_http_throttle_strict_settle_send(
    ngx_pool_t *pool, ngx_http_throttle_check_t *check, int64_t delta_units,
    ngx_http_throttle_redis_done_pt done, void *data) noexcept;
bool ngx_http_throttle_strict_settle_taken(const redisReply *reply) noexcept;
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_reset_send(ngx_pool_t *pool, ngx_http_throttle_check_t *check,
                             ngx_http_throttle_redis_done_pt done,
                             void                           *data) noexcept;
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_strict_renew(ngx_http_throttle_check_t      *check,
                               ngx_http_throttle_redis_done_pt done,
                               void                           *data) noexcept;

/* ngx_http_throttle_flight.cpp: one script in flight per strict key */
void      ngx_http_throttle_flight_take(ngx_http_throttle_ctx_t *ctx) noexcept;
void      ngx_http_throttle_flight_land(ngx_http_throttle_check_t *check,
                                        bool                       failed) noexcept;
ngx_int_t ngx_http_throttle_flight_wait(ngx_http_throttle_ctx_t *ctx) noexcept;

/* ngx_http_throttle_places.cpp: concurrent=, the places requests hold */
ngx_int_t ngx_http_throttle_hold_places(ngx_http_throttle_ctx_t *ctx) noexcept;
void
ngx_http_throttle_free_places(ngx_http_throttle_request_ctx_t *rctx) noexcept;
void ngx_http_throttle_places_init_worker(
    ngx_cycle_t *cycle, ngx_http_throttle_main_conf_t *tmcf) noexcept;

/* ngx_http_throttle_settle.cpp: settle=, when the request ends */
ngx_int_t ngx_http_throttle_settle_handler(ngx_http_request_t *r) noexcept;

/* ngx_http_throttle_filter.cpp */
ngx_int_t ngx_http_throttle_filter_init(ngx_conf_t *cf) noexcept;
ngx_int_t ngx_http_throttle_add_header(ngx_http_request_t *r, ngx_str_t name,
                                       u_char *value, size_t len) noexcept;
ngx_int_t ngx_http_throttle_send(ngx_http_request_t *r, ngx_uint_t status,
                                 ngx_buf_t *b) noexcept;

/* ngx_http_throttle_variables.cpp */
ngx_int_t ngx_http_throttle_add_variables(ngx_conf_t *cf) noexcept;

#endif /* NGX_HTTP_THROTTLE_REQUEST_H */
