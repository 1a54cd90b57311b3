/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Redis transport: a set of connections per worker and backend, on
 * nginx's own event loop (no worker ever blocks), with hiredis as the RESP
 * codec, nginx's SSL for TLS, and nginx timers for every timeout.
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_H
#define NGX_HTTP_THROTTLE_REDIS_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_event_connect.h>
}

#include "ngx_http_throttle_redis_metrics.h"

#include "throttle/scripts.hpp"

struct redisReply;

/* A worker's connections to one backend. */
typedef struct ngx_http_throttle_redis_worker_s
    ngx_http_throttle_redis_worker_t;

typedef struct ngx_http_throttle_redis_cmd_s ngx_http_throttle_redis_cmd_t;

/* What a backend's addresses are: the one Redis, the nodes a Cluster is
 * first asked about, or the sentinels that know the master. */
typedef enum {
    NGX_HTTP_THROTTLE_REDIS_SERVER = 0,
    NGX_HTTP_THROTTLE_REDIS_CLUSTER,
    NGX_HTTP_THROTTLE_REDIS_SENTINEL
} ngx_http_throttle_redis_topology_e;

/* A "throttle_redis" backend, as configured. */
typedef struct {
    ngx_str_t   name;
    ngx_uint_t  topology;
    ngx_array_t addresses; /* of ngx_url_t: server=, cluster= or sentinel= */
    ngx_str_t   master;    /* the name the sentinels know the master by */
    ngx_str_t   sentinel_username;
    ngx_str_t   sentinel_password;
    ngx_int_t   max_redirects;
    ngx_msec_t  cluster_refresh;
    ngx_str_t   username;
    ngx_str_t   password;
    ngx_int_t   database;
    ngx_flag_t  tls;
    ngx_flag_t  tls_verify;
    ngx_str_t   tls_trusted_certificate;
    ngx_str_t   tls_name;
    ngx_msec_t  connect_timeout;
    ngx_msec_t  timeout;
    ngx_uint_t  keepalive;
    ngx_str_t   prefix;
#if (NGX_SSL)
    ngx_ssl_t *ssl;
#endif
    ngx_http_throttle_redis_metrics_t *metrics; /* the whole nginx's */
    ngx_http_throttle_redis_worker_t  *worker;  /* this worker's connections */
} ngx_http_throttle_redis_t;

/*
 * Called exactly once per command, unless detached first: "reply" is the
 * script's reply (error replies included), or NULL when Redis could not
 * answer in time, and then "err" says why and "sent" whether the command
 * had been written to Redis (so it may still run: a stalled Redis). The
 * reply is freed afterwards.
 */
typedef void (*ngx_http_throttle_redis_done_pt)(void *data, redisReply *reply,
                                                const char *err, bool sent);

/* A script call: its KEYS, and its ARGV, integers (every script of the
 * module takes integers), sent as decimal strings. */
typedef struct {
    const throttle::Script *script;
    const ngx_str_t        *keys;
    ngx_uint_t              nkeys;
    const int64_t          *argv;
    ngx_uint_t              nargv;
    ngx_msec_t              timeout; /* for the reply; 0: the backend's */
} ngx_http_throttle_redis_call_t;

/* throttle_redis NAME server=... (http block) */
char *ngx_http_throttle_redis_directive(ngx_conf_t  *cf,
                                        ngx_array_t *backends) noexcept;

ngx_int_t ngx_http_throttle_redis_init_worker(
    ngx_cycle_t *cycle, ngx_http_throttle_redis_t *backend) noexcept;
void ngx_http_throttle_redis_exit_worker(
    ngx_http_throttle_redis_t *backend) noexcept;

/*
 * Runs a script with EVALSHA (EVAL once if Redis lacks it). Returns NULL
 * when the backend cannot take a command now (backing off after failures):
 * the caller decides at once. "done" may be NULL for a command whose answer
 * does not matter.
 */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_eval(ngx_http_throttle_redis_t            *backend,
                             const ngx_http_throttle_redis_call_t *call,
                             ngx_http_throttle_redis_done_pt       done,
                             void *data) noexcept;

/* Whether each script call must keep to one hash slot (a Cluster): async
 * batches are then cut at their shard's bounds. */
bool
ngx_http_throttle_redis_clustered(ngx_http_throttle_redis_t *backend) noexcept;

/* Whether the backend is backing off after failures: commands fail now. */
bool ngx_http_throttle_redis_backing_off(
    ngx_http_throttle_redis_t *backend) noexcept;

/* The requester is gone: its reply, when it comes, is dropped. */
void
ngx_http_throttle_redis_detach(ngx_http_throttle_redis_cmd_t *cmd) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_H */
