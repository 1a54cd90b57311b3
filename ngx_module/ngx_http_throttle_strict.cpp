/*
 * Strict mode: a Redis-backed zone's decision is one EVALSHA of gcra.lua,
 * sent without blocking; the request resumes when every zone of it has
 * answered (or failed, within the backend's timeout).
 */

#include "ngx_http_throttle_module.h"

#include "throttle/clock.hpp"
#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>

/* The request is going away: replies still on their way are dropped. */
static void
ngx_http_throttle_strict_cleanup(void *data) noexcept
{
    ngx_uint_t               i;
    ngx_http_throttle_ctx_t *ctx = (ngx_http_throttle_ctx_t *) data;

    for (i = 0; i < ctx->nchecks; i++) {
        if (ctx->checks[i].cmd) {
            ngx_http_throttle_redis_detach(ctx->checks[i].cmd);
            ctx->checks[i].cmd = NULL;
        }
    }
}

static void
ngx_http_throttle_strict_log(ngx_http_throttle_zone_t *zone,
                             std::string_view          message) noexcept
{
    if (zone->error_logged_at
        && ngx_current_msec - zone->error_logged_at < 1000) {
        return; /* a line a second is enough to tell */
    }

    zone->error_logged_at = ngx_current_msec;
    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "throttle zone \"%V\": Redis answered: %*s", &zone->name,
                  ngx_min(message.size(), (size_t) 200), message.data());
}

static void
ngx_http_throttle_strict_done(void *data, redisReply *reply, const char *err,
                              bool sent) noexcept
{
    ngx_http_throttle_check_t *check = (ngx_http_throttle_check_t *) data;
    ngx_http_throttle_ctx_t   *ctx = check->ctx;

    check->cmd = NULL;

    if (reply == NULL) {
        check->failed = 1; /* the transport has logged why */

    } else {
        throttle::ScriptReply decoded = throttle::decode_gcra_reply(reply);

        if (decoded.kind == throttle::ScriptReply::ok) {
            check->decision.result = decoded.result;

        } else {
            check->failed = 1;
            ngx_http_throttle_strict_log(check->zone, decoded.message);
        }
    }

    if (--ctx->pending == 0) {
        ngx_http_throttle_resume(ctx);
    }
}

static u_char *
ngx_http_throttle_strict_number(ngx_pool_t *pool, ngx_str_t *out,
                                int64_t value) noexcept
{
    u_char *p = (u_char *) ngx_pnalloc(pool, NGX_INT64_LEN);

    if (p) {
        out->data = p;
        out->len = ngx_sprintf(p, "%L", value) - p;
    }

    return p;
}

ngx_uint_t
ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_str_t                  args[5];
    ngx_pool_cleanup_t        *cln;
    ngx_http_request_t        *r = ctx->request;
    ngx_http_throttle_zone_t  *zone;
    ngx_http_throttle_check_t *check;
    u_char                    *p;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return 0;
    }

    cln->handler = ngx_http_throttle_strict_cleanup;
    cln->data = ctx;

    ctx->pending = 1; /* no resuming before every command is out */

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        zone = check->zone;

        if (zone == NULL || !ngx_http_throttle_strict(zone)) {
            continue;
        }

        check->failed = 1;

        p = (u_char *) ngx_pnalloc(
            r->pool,
            throttle::max_redis_key_len(zone->redis->prefix.len,
                                        zone->name.len));
        if (p == NULL) {
            continue;
        }

        check->redis_key.data = p;
        check->redis_key.len = throttle::format_redis_key(
            (char *) p,
            {(const char *) zone->redis->prefix.data, zone->redis->prefix.len},
            {(const char *) zone->name.data, zone->name.len}, check->key);

        args[0] = check->redis_key;

        if (ngx_http_throttle_strict_number(
                r->pool, &args[1], zone->policy.gcra.emission_interval_us)
                == NULL
            || ngx_http_throttle_strict_number(r->pool, &args[2],
                                               zone->policy.gcra.tolerance_us)
                == NULL
            || ngx_http_throttle_strict_number(r->pool, &args[3],
                                               zone->policy.gcra.limit)
                == NULL
            || ngx_http_throttle_strict_number(r->pool, &args[4], check->cost)
                == NULL)
        {
            continue;
        }

        check->sent_at = throttle::monotonic_now_us();
        check->cmd = ngx_http_throttle_redis_eval(
            zone->redis, throttle::ScriptId::gcra, args, 1, 5, 0,
            ngx_http_throttle_strict_done, check);

        if (check->cmd) {
            check->failed = 0;
            ctx->pending++;
        }
    }

    return --ctx->pending;
}

void
ngx_http_throttle_strict_settle(ngx_http_throttle_ctx_t *ctx,
                                bool                     admitted) noexcept
{
    ngx_uint_t                 i;
    ngx_str_t                  args[3];
    int64_t                    now = throttle::monotonic_now_us();
    ngx_http_request_t        *r = ctx->request;
    ngx_http_throttle_zone_t  *zone;
    ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        zone = check->zone;

        if (zone == NULL || !ngx_http_throttle_strict(zone) || check->failed) {
            continue;
        }

        const throttle::ThrottleResult &res = check->decision.result;

        if (res.limited) {
            ngx_http_throttle_cache_tat(check,
                                        check->sent_at + res.reset_after_us,
                                        now, r->connection->log);
            continue;
        }

        if (admitted || check->cost == 0) {
            continue;
        }

        /* charged by Redis for a request another zone refused */
        args[0] = check->redis_key;

        if (ngx_http_throttle_strict_number(
                r->pool, &args[1], zone->policy.gcra.emission_interval_us)
                == NULL
            || ngx_http_throttle_strict_number(r->pool, &args[2], check->cost)
                == NULL)
        {
            continue;
        }

        (void) ngx_http_throttle_redis_eval(zone->redis,
                                            throttle::ScriptId::gcra_refund,
                                            args, 1, 3, 0, NULL, NULL);
    }
}
