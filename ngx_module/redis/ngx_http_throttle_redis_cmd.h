/* SPDX-License-Identifier: BSD-2-Clause */
/* The commands on a connection: written in RESP, answered in order. */

#ifndef NGX_HTTP_THROTTLE_REDIS_CMD_H
#define NGX_HTTP_THROTTLE_REDIS_CMD_H

#include "ngx_http_throttle_redis_types.h"

ngx_http_throttle_redis_cmd_t *ngx_http_throttle_redis_create_cmd(
    ngx_http_throttle_redis_worker_t     *worker,
    const ngx_http_throttle_redis_call_t *call) noexcept;

ngx_int_t ngx_http_throttle_redis_queue_setup(
    ngx_http_throttle_redis_conn_t *conn) noexcept;

void ngx_http_throttle_redis_count_written(ngx_http_throttle_redis_conn_t *conn,
                                           uint64_t from) noexcept;

ngx_int_t
ngx_http_throttle_redis_conn_send(ngx_http_throttle_redis_conn_t *conn,
                                  ngx_http_throttle_redis_cmd_t  *cmd,
                                  bool asking) noexcept;

bool ngx_http_throttle_redis_send(ngx_http_throttle_redis_node_t *node,
                                  ngx_http_throttle_redis_cmd_t  *cmd,
                                  bool asking) noexcept;

ngx_http_throttle_redis_cmd_t *ngx_http_throttle_redis_conn_query(
    ngx_http_throttle_redis_conn_t *conn, int argc, const char **argv,
    const size_t *argvlen, ngx_msec_t timeout,
    ngx_http_throttle_redis_done_pt done, void *data) noexcept;

bool ngx_http_throttle_redis_dispatch(ngx_http_throttle_redis_conn_t *conn,
                                      redisReply *reply) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_CMD_H */
