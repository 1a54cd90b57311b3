/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One log line per interval at most, for errors that would otherwise come
 * with every request (a dead Redis under load, a full zone): the first
 * goes out, the ones after it are counted until the interval has passed.
 */

#ifndef NGX_HTTP_THROTTLE_LOG_H
#define NGX_HTTP_THROTTLE_LOG_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
}

typedef struct {
    int64_t    last;       /* when a line last went out; 0: never */
    ngx_uint_t suppressed; /* lines held back since */
} ngx_http_throttle_log_limit_t;

/* Whether a line may go out at "now" (of any clock, in the unit of
 * "interval"); if it may not, it is counted in "suppressed". */
static inline bool
ngx_http_throttle_log_due(ngx_http_throttle_log_limit_t *limit, int64_t now,
                          int64_t interval)
{
    if (limit->last != 0 && now - limit->last < interval) {
        limit->suppressed++;
        return false;
    }

    limit->last = now;
    return true;
}

#endif /* NGX_HTTP_THROTTLE_LOG_H */
