/* SPDX-License-Identifier: BSD-2-Clause */
/* The master the sentinels name, and the news of its replacement. */

#ifndef NGX_HTTP_THROTTLE_REDIS_SENTINEL_H
#define NGX_HTTP_THROTTLE_REDIS_SENTINEL_H

#include "ngx_http_throttle_redis_types.h"

ngx_int_t
ngx_http_throttle_redis_sentinel_init(ngx_http_throttle_redis_worker_t *worker,
                                      ngx_pool_t *pool) noexcept;

void ngx_http_throttle_redis_sentinel_exit(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

void
ngx_http_throttle_redis_resolve(ngx_http_throttle_redis_conn_t *conn) noexcept;

void ngx_http_throttle_redis_sentinel_news(ngx_http_throttle_redis_conn_t *conn,
                                           redisReply *reply) noexcept;

bool
ngx_http_throttle_redis_sentinel_steer(ngx_http_throttle_redis_conn_t *conn,
                                       ngx_http_throttle_redis_cmd_t  *cmd,
                                       redisReply *reply) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_SENTINEL_H */
