/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Redis transport: a set of connections per worker and backend, on
 * nginx's own event loop (no worker ever blocks), with hiredis as the RESP
 * codec, nginx's SSL for TLS, and nginx timers for every timeout.
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_H
#define NGX_HTTP_THROTTLE_REDIS_H

#include "ngx_http_throttle_redis_backend.h"
#include "ngx_http_throttle_redis_metrics.h"

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
