/*
 * Strict mode: a Redis-backed zone's decision is one EVALSHA of its
 * algorithm's script (gcra.lua, fixed_window.lua, ...), sent without
 * blocking; the request resumes when every zone of it has
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
        throttle::ScriptReply decoded = throttle::decode_decision_reply(
            reply,
            throttle::strict_scripts(check->zone->policy.algorithm).tokens);

        if (decoded.kind == throttle::ScriptReply::ok) {
            check->decision.result = decoded.result;
            check->tokens[0] = decoded.tokens[0];
            check->tokens[1] = decoded.tokens[1];

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

/* The decision script's ARGV: GCRA's T, DVT, limit and cost, or a
 * window's length, limit and cost (see src/scripts/). Returns how many. */
static ngx_uint_t
ngx_http_throttle_strict_args(ngx_pool_t *pool, ngx_http_throttle_zone_t *zone,
                              int64_t cost, ngx_str_t *argv) noexcept
{
    int64_t                 values[4];
    ngx_uint_t              i, n;
    const throttle::Policy &policy = zone->policy;

    if (policy.algorithm == throttle::Algorithm::gcra) {
        values[0] = policy.gcra.emission_interval_us;
        values[1] = policy.gcra.tolerance_us;
        values[2] = policy.gcra.limit;
        values[3] = cost;
        n = 4;

    } else {
        values[0] = policy.window.window_us;
        values[1] = policy.window.limit;
        values[2] = cost;
        n = 3;
    }

    for (i = 0; i < n; i++) {
        if (ngx_http_throttle_strict_number(pool, &argv[i], values[i]) == NULL)
        {
            return 0;
        }
    }

    return n;
}

ngx_uint_t
ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i, nargs;
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
        nargs =
            ngx_http_throttle_strict_args(r->pool, zone, check->cost, &args[1]);
        if (nargs == 0) {
            continue;
        }

        check->sent_at = ngx_http_throttle_now(zone);
        check->cmd = ngx_http_throttle_redis_eval(
            zone->redis,
            throttle::strict_scripts(zone->policy.algorithm).decide, args, 1,
            1 + nargs, 0, ngx_http_throttle_strict_done, check);

        if (check->cmd) {
            check->failed = 0;
            ctx->pending++;
        }
    }

    return --ctx->pending;
}

/* What Redis's rejection lets the zone reject by itself, and until when. */
static void
ngx_http_throttle_strict_remember(ngx_http_throttle_check_t *check, int64_t now,
                                  ngx_log_t *log) noexcept
{
    throttle::KeyState              tat;
    throttle::RememberedDenial      denial;
    const throttle::ThrottleResult &res = check->decision.result;

    if (check->zone->policy.algorithm == throttle::Algorithm::gcra) {
        /* a lower bound of the TAT, which only grows */
        tat.words[0] = check->sent_at + res.reset_after_us;
        ngx_http_throttle_cache_denial(check, tat, tat.words[0], now, log);
        return;
    }

    denial = throttle::remember_denial(res, check->cost, check->sent_at);

    if (denial.expire_at_us) {
        ngx_http_throttle_cache_denial(check, denial.state, denial.expire_at_us,
                                       now, log);
    }
}

/* Gives back what Redis charged for a request another zone refused; the
 * refund script's ARGV is the algorithm's (see the refund scripts in
 * src/scripts). */
static void
ngx_http_throttle_strict_refund(ngx_http_request_t        *r,
                                ngx_http_throttle_check_t *check) noexcept
{
    int64_t                   values[3];
    ngx_uint_t                i, n;
    ngx_str_t                 args[4];
    ngx_http_throttle_zone_t *zone = check->zone;
    const throttle::Policy   &policy = zone->policy;

    switch (policy.algorithm) {
    case throttle::Algorithm::gcra:
        values[0] = policy.gcra.emission_interval_us;
        values[1] = check->cost;
        n = 2;
        break;
    case throttle::Algorithm::fixed_window:
        values[0] = check->cost;
        values[1] = check->tokens[0]; /* the window charged */
        n = 2;
        break;
    case throttle::Algorithm::sliding_window:
        values[0] = check->cost;
        values[1] = check->tokens[0]; /* the window charged */
        values[2] = policy.window.window_us;
        n = 3;
        break;
    case throttle::Algorithm::sliding_log:
        values[0] = check->tokens[0]; /* the entries' time */
        values[1] = check->tokens[1]; /* and first sequence number */
        values[2] = check->cost;
        n = 3;
        break;
    default:
        return;
    }

    args[0] = check->redis_key;

    for (i = 0; i < n; i++) {
        if (ngx_http_throttle_strict_number(r->pool, &args[1 + i], values[i])
            == NULL) {
            return;
        }
    }

    (void) ngx_http_throttle_redis_eval(
        zone->redis, throttle::strict_scripts(policy.algorithm).refund, args, 1,
        1 + n, 0, NULL, NULL);
}

void
ngx_http_throttle_strict_settle(ngx_http_throttle_ctx_t *ctx,
                                bool                     admitted) noexcept
{
    ngx_uint_t                 i;
    ngx_http_request_t        *r = ctx->request;
    ngx_http_throttle_zone_t  *zone;
    ngx_http_throttle_check_t *check;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];
        zone = check->zone;

        if (zone == NULL || !ngx_http_throttle_strict(zone) || check->failed) {
            continue;
        }

        if (check->decision.result.limited) {
            ngx_http_throttle_strict_remember(
                check, ngx_http_throttle_now(zone), r->connection->log);
            continue;
        }

        if (!admitted && check->cost > 0) {
            ngx_http_throttle_strict_refund(r, check);
        }
    }
}
