/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one adder of every throttle_metrics counter, zones' and Redis
 * backends' alike. Compiled with -DNGX_HTTP_THROTTLE_COUNTERS=0 it adds
 * nothing: `make bench` builds such a module too, so that its
 * throttle_pass_no_counters row measures what the counters cost on the
 * request path. Every other build counts.
 */

#ifndef NGX_HTTP_THROTTLE_COUNTER_H
#define NGX_HTTP_THROTTLE_COUNTER_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
}

#ifndef NGX_HTTP_THROTTLE_COUNTERS
#define NGX_HTTP_THROTTLE_COUNTERS 1
#endif

/* An atomic add: no lock, whichever worker adds. */
static inline void
ngx_http_throttle_metrics_add(ngx_atomic_t *counter, int64_t n) noexcept
{
#if (NGX_HTTP_THROTTLE_COUNTERS)
    (void) ngx_atomic_fetch_add(counter, (ngx_atomic_int_t) n);
#else
    (void) counter;
    (void) n;
#endif
}

#endif /* NGX_HTTP_THROTTLE_COUNTER_H */
