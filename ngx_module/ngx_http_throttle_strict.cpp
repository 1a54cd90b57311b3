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

/* Script arguments as strings in the request's pool; false if out of
 * memory. */
static bool
ngx_http_throttle_strict_argv(ngx_pool_t *pool, const throttle::ScriptArgs &a,
                              ngx_str_t *argv) noexcept
{
    size_t i;

    for (i = 0; i < a.n; i++) {
        if (ngx_http_throttle_strict_number(pool, &argv[i], a.values[i])
            == NULL) {
            return false;
        }
    }

    return true;
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
        throttle::ScriptArgs argv =
            throttle::strict_args(zone->policy, check->cost);

        if (!ngx_http_throttle_strict_argv(r->pool, argv, &args[1])) {
            continue;
        }

        nargs = argv.n;

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
    ngx_str_t                 args[4];
    ngx_http_throttle_zone_t *zone = check->zone;
    throttle::ScriptArgs      argv =
        throttle::refund_args(zone->policy, check->cost, check->tokens);

    args[0] = check->redis_key;

    if (!ngx_http_throttle_strict_argv(r->pool, argv, &args[1])) {
        return;
    }

    (void) ngx_http_throttle_redis_eval(
        zone->redis, throttle::strict_scripts(zone->policy.algorithm).refund,
        args, 1, 1 + argv.n, 0, NULL, NULL);
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
