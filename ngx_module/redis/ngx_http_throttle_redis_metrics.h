/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the Redis transport counts, for throttle_metrics: per backend, the
 * whole nginx's figures (every worker's), kept in a shared-memory zone of
 * the module's own. A backend's record is found by its name, so a reload
 * that keeps the name keeps its counters. Counters are atomic adds: no
 * lock on the request path.
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_METRICS_H
#define NGX_HTTP_THROTTLE_REDIS_METRICS_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
}

#include "ngx_http_throttle_counter.h"

/* nginx_throttle_redis_errors_total's "kind" label */
typedef enum {
    NGX_HTTP_THROTTLE_REDIS_ERR_TIMEOUT = 0,
    NGX_HTTP_THROTTLE_REDIS_ERR_CONNECT,
    NGX_HTTP_THROTTLE_REDIS_ERR_TLS,
    NGX_HTTP_THROTTLE_REDIS_ERR_AUTH,
    NGX_HTTP_THROTTLE_REDIS_ERR_REPLY,
    NGX_HTTP_THROTTLE_REDIS_ERR_NOSCRIPT,
    /* Cluster and Sentinel backends only */
    NGX_HTTP_THROTTLE_REDIS_ERR_MOVED,
    NGX_HTTP_THROTTLE_REDIS_ERR_ASK,
    NGX_HTTP_THROTTLE_REDIS_ERR_CLUSTERDOWN,
    NGX_HTTP_THROTTLE_REDIS_ERR_SENTINEL,
    NGX_HTTP_THROTTLE_REDIS_ERR_FAILOVER,
    NGX_HTTP_THROTTLE_REDIS_NERRORS
} ngx_http_throttle_redis_error_e;

/* The latency histogram's upper bounds, in microseconds (0.1 ms to 1 s),
 * and one more bucket for what is slower (+Inf). */
#define NGX_HTTP_THROTTLE_REDIS_NBUCKETS 13

extern const int64_t
    ngx_http_throttle_redis_buckets_us[NGX_HTTP_THROTTLE_REDIS_NBUCKETS];

typedef struct ngx_http_throttle_redis_metrics_s
    ngx_http_throttle_redis_metrics_t;

/* One backend's figures, in the shared zone. */
struct ngx_http_throttle_redis_metrics_s {
    ngx_http_throttle_redis_metrics_t *next; /* the zone's list */
    ngx_str_t                          name; /* the backend's */
    ngx_atomic_t                       commands;
    ngx_atomic_t                       errors[NGX_HTTP_THROTTLE_REDIS_NERRORS];
    /* per bucket, not cumulative; the last is +Inf */
    ngx_atomic_t latency[NGX_HTTP_THROTTLE_REDIS_NBUCKETS + 1];
    ngx_atomic_t latency_sum_us;
    ngx_atomic_t slot_map_refreshes;
    /* connections open, per worker (by process slot): each worker writes
     * only its own, and sets it to 0 when it starts, so that a worker that
     * died does not leave its count behind */
    ngx_atomic_t connections[NGX_MAX_PROCESSES];
};

/* Adds the zone when the configuration has backends; at postconfiguration.
 * "tag": the module's, as every shared zone of it. */
ngx_int_t ngx_http_throttle_redis_metrics_zone(ngx_conf_t  *cf,
                                               ngx_array_t *backends,
                                               void        *tag) noexcept;

/* This worker's connection counts start at 0. */
void ngx_http_throttle_redis_metrics_init_worker(
    ngx_http_throttle_redis_metrics_t *m) noexcept;

static inline void
ngx_http_throttle_redis_count_error(ngx_http_throttle_redis_metrics_t *m,
                                    ngx_http_throttle_redis_error_e    kind)
{
    if (m) {
        ngx_http_throttle_metrics_add(&m->errors[kind], 1);
    }
}

static inline void
ngx_http_throttle_redis_count_command(ngx_http_throttle_redis_metrics_t *m)
{
    if (m) {
        ngx_http_throttle_metrics_add(&m->commands, 1);
    }
}

static inline void
ngx_http_throttle_redis_count_connection(ngx_http_throttle_redis_metrics_t *m,
                                         ngx_atomic_int_t delta)
{
    if (m) {
        ngx_http_throttle_metrics_add(&m->connections[ngx_process_slot], delta);
    }
}

static inline void
ngx_http_throttle_redis_count_slot_map_refresh(
    ngx_http_throttle_redis_metrics_t *m)
{
    if (m) {
        ngx_http_throttle_metrics_add(&m->slot_map_refreshes, 1);
    }
}

/* A script's round trip, from its write to its reply. */
void ngx_http_throttle_redis_count_latency(ngx_http_throttle_redis_metrics_t *m,
                                           int64_t us) noexcept;

/* The backends' families for throttle_metrics: at most "size" bytes of
 * text, written from "p" (no further than "last"); returns the end. */
size_t  ngx_http_throttle_redis_metrics_size(ngx_array_t *backends) noexcept;
u_char *ngx_http_throttle_redis_metrics_write(u_char *p, u_char *last,
                                              ngx_array_t *backends) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_METRICS_H */
