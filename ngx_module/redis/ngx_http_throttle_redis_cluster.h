/* SPDX-License-Identifier: BSD-2-Clause */
/* A Redis Cluster: which node a script goes to, MOVED and ASK. */

#ifndef NGX_HTTP_THROTTLE_REDIS_CLUSTER_H
#define NGX_HTTP_THROTTLE_REDIS_CLUSTER_H

#include "ngx_http_throttle_redis_types.h"

ngx_int_t ngx_http_throttle_redis_cluster_init(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_route(ngx_http_throttle_redis_worker_t *worker,
                                      const ngx_str_t *key) noexcept;

bool ngx_http_throttle_redis_cluster_steer(ngx_http_throttle_redis_conn_t *conn,
                                           ngx_http_throttle_redis_cmd_t  *cmd,
                                           redisReply *reply) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_CLUSTER_H */
