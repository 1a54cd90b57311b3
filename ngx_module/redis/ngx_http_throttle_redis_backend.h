/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a Redis backend is, as configured, and what a command to it looks
 * like: the types the transport's files and its users share. The
 * functions are in ngx_http_throttle_redis.h.
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_BACKEND_H
#define NGX_HTTP_THROTTLE_REDIS_BACKEND_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_event_connect.h>
}

#include "throttle/scripts.hpp"

/* A backend's counters, shared by the workers: the metrics endpoint reads
 * them (ngx_http_throttle_redis_metrics.h). */
typedef struct ngx_http_throttle_redis_metrics_s
    ngx_http_throttle_redis_metrics_t;

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

#endif /* NGX_HTTP_THROTTLE_REDIS_BACKEND_H */
