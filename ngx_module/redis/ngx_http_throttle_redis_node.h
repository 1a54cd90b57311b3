/* SPDX-License-Identifier: BSD-2-Clause */
/* A worker's nodes of a backend: adding them, their addresses, backing
 * off after failures, and the log that says so. */

#ifndef NGX_HTTP_THROTTLE_REDIS_NODE_H
#define NGX_HTTP_THROTTLE_REDIS_NODE_H

#include "ngx_http_throttle_redis_types.h"

void ngx_http_throttle_redis_log_error(ngx_http_throttle_redis_worker_t *worker,
                                       ngx_str_t                        *where,
                                       const char *err) noexcept;

void ngx_http_throttle_redis_back_off(ngx_http_throttle_redis_node_t *node,
                                      const char *err) noexcept;

bool ngx_http_throttle_redis_node_backing_off(
    ngx_http_throttle_redis_node_t *node) noexcept;

ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_add_node(ngx_http_throttle_redis_worker_t *worker,
                                 ngx_addr_t *addr, ngx_str_t *host,
                                 bool sentinel) noexcept;

void ngx_http_throttle_redis_set_address(ngx_http_throttle_redis_node_t *node,
                                         struct sockaddr *sockaddr,
                                         socklen_t        socklen) noexcept;

namespace throttle {
struct NodeAddress;
}

bool ngx_http_throttle_redis_parse_address(const throttle::NodeAddress &where,
                                           ngx_sockaddr_t              *sa,
                                           socklen_t *len) noexcept;

/* A Cluster's nodes, found by what a reply names */

ngx_http_throttle_redis_node_t *ngx_http_throttle_redis_cluster_node(
    ngx_http_throttle_redis_worker_t *worker,
    const throttle::NodeAddress      &where,
    ngx_http_throttle_redis_node_t   *from) noexcept;

void ngx_http_throttle_redis_cluster_name(ngx_http_throttle_redis_node_t *node,
                                          std::string_view name) noexcept;

uint16_t ngx_http_throttle_redis_node_index(
    ngx_http_throttle_redis_worker_t *worker,
    ngx_http_throttle_redis_node_t   *node) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_NODE_H */
