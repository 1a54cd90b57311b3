/* SPDX-License-Identifier: BSD-2-Clause */
/* A Cluster's slot map, as a worker knows it, and its refreshes. */

#ifndef NGX_HTTP_THROTTLE_REDIS_SLOTS_H
#define NGX_HTTP_THROTTLE_REDIS_SLOTS_H

#include "ngx_http_throttle_redis_types.h"

ngx_int_t ngx_http_throttle_redis_slots_init(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

void ngx_http_throttle_redis_cluster_refresh_soon(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_SLOTS_H */
