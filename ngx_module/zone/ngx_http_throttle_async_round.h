/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Async mode's rounds, shared by ngx_http_throttle_async.cpp (when a worker
 * syncs a zone, and what it takes) and ngx_http_throttle_async_call.cpp
 * (the script calls that carry a round to Redis, and their replies).
 */

#ifndef NGX_HTTP_THROTTLE_ASYNC_ROUND_H
#define NGX_HTTP_THROTTLE_ASYNC_ROUND_H

#include "ngx_http_throttle_zone.h"

/* Keys per script call (one slot, one Lua run), and per round. */
#define NGX_HTTP_THROTTLE_ASYNC_BATCH 500
#define NGX_HTTP_THROTTLE_ASYNC_MAX 20000

typedef struct {
    u_char                *data; /* the key as the zone stores it */
    uint64_t               tag;  /* its slot's in the zone's table */
    u_short                len;
    u_char                 hashed;
    u_char                 shard; /* on a Cluster: the slot it syncs in */
    throttle::PendingUnits units; /* taken from its record */
    uint32_t               rate;  /* its record's (throttle::pack_rate()) */
} ngx_http_throttle_async_key_t;

/* One sync of a zone by this worker: the keys it took from the zone, sent
 * in calls of up to NGX_HTTP_THROTTLE_ASYNC_BATCH keys. */
typedef struct {
    ngx_http_throttle_zone_t      *zone;
    int64_t                        sent_at; /* the zone's clock, us */
    ngx_uint_t                     nkeys;
    ngx_uint_t                     calls_in_flight;
    ngx_http_throttle_async_key_t *keys;
    unsigned took_all : 1; /* every unit the zone had to send */
    unsigned failed : 1;   /* a call of it failed */
} ngx_http_throttle_async_round_t;

/* One script call of a round: keys [first, first + n) of it. */
typedef struct {
    ngx_http_throttle_async_round_t *round;
    ngx_uint_t                       first;
    ngx_uint_t                       n;
    ngx_http_throttle_redis_call_t   eval;
} ngx_http_throttle_async_call_t;

/* ngx_http_throttle_async_call.cpp: sends keys [first, first + n) of the
 * round as one script call; its reply updates the zone. The round's
 * schedule (ngx_http_throttle_async.cpp) uses these; they use nothing of
 * it. */
void ngx_http_throttle_async_send(ngx_http_throttle_async_round_t *round,
                                  ngx_uint_t first, ngx_uint_t n) noexcept;

/* Whether this worker is shutting down (gracefully), and sending its last
 * units. */
static inline bool
ngx_http_throttle_async_exiting() noexcept
{
    return ngx_exiting || ngx_quit;
}

/* ngx_http_throttle_async_call.cpp: every call of the round is done. */
void
ngx_http_throttle_async_finish(ngx_http_throttle_async_round_t *round) noexcept;

#endif /* NGX_HTTP_THROTTLE_ASYNC_ROUND_H */
