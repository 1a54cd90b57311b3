/* SPDX-License-Identifier: BSD-2-Clause */
/* One connection to a Redis node: connecting, writing, reading, timeouts,
 * closing; and which of a node's connections a command goes on. */

#ifndef NGX_HTTP_THROTTLE_REDIS_CONN_H
#define NGX_HTTP_THROTTLE_REDIS_CONN_H

#include "ngx_http_throttle_redis_types.h"

ngx_int_t
ngx_http_throttle_redis_open(ngx_http_throttle_redis_conn_t *conn) noexcept;

void
ngx_http_throttle_redis_connect(ngx_http_throttle_redis_conn_t *conn) noexcept;

bool ngx_http_throttle_redis_arm_timer(
    ngx_http_throttle_redis_conn_t *conn) noexcept;

void
ngx_http_throttle_redis_flush(ngx_http_throttle_redis_conn_t *conn) noexcept;

void ngx_http_throttle_redis_fail(ngx_http_throttle_redis_conn_t *conn,
                                  const char                     *err) noexcept;
void ngx_http_throttle_redis_fail_as(ngx_http_throttle_redis_conn_t *conn,
                                     ngx_http_throttle_redis_error_e kind,
                                     const char *err) noexcept;

void ngx_http_throttle_redis_drop(ngx_http_throttle_redis_conn_t *conn,
                                  const char                     *err) noexcept;

ngx_http_throttle_redis_conn_t *
ngx_http_throttle_redis_pick(ngx_http_throttle_redis_node_t *node) noexcept;

void ngx_http_throttle_redis_fail_node(ngx_http_throttle_redis_node_t *node,
                                       const char *err) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_CONN_H */
