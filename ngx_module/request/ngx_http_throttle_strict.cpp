/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Strict mode: a Redis-backed zone's decision is one EVALSHA of its
 * algorithm's script (throttle::Policy::decision_call()), sent without
 * blocking; the request resumes when every zone of it has answered (or
 * failed, within the backend's timeout). Afterwards the zone learns from
 * each answer (what it may reject by itself until Redis's answer could
 * change), and a charge the request did not use (another zone refused it)
 * is given back. Each script is the request's policy's (its plan's, where
 * the zone's rate= or burst= is a variable: the script takes the rate and
 * burst as arguments). When the request ends, settle= sends one more
 * script per zone whose settled units differ from its reservation.
 * throttle_api's settles and resets send their scripts through here too
 * (a reset's also in async zones).
 */

#include "ngx_http_throttle_zone_metrics.h"
#include "ngx_http_throttle_request.h"

#include "throttle/redis.hpp"

#include <hiredis/hiredis.h>

/* The request is going away: replies still on their way are dropped, and
 * the flights they were are over. */
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

        ngx_http_throttle_flight_land(&ctx->checks[i], false);
    }
}

static void
ngx_http_throttle_strict_done(void *data, redisReply *reply, const char *err,
                              bool sent) noexcept
{
    ngx_http_throttle_check_t *check = (ngx_http_throttle_check_t *) data;
    ngx_http_throttle_ctx_t   *ctx = check->ctx;
    ngx_http_throttle_zone_t  *zone = check->lookup.zone;
    ngx_uint_t                 i = (ngx_uint_t) (check - ctx->checks);

    check->cmd = NULL;

    if (reply == NULL) {
        ctx->decision.failed(i); /* the transport has logged why */

    } else {
        throttle::ScriptReply decoded = zone->policy.read_decision(reply);

        if (decoded.ok) {
            ctx->decision.answered(i, decoded.result);
            check->tokens[0] = decoded.tokens[0];
            check->tokens[1] = decoded.tokens[1];

        } else {
            ctx->decision.failed(i);

            /* an error reply has been counted by the transport */
            if (reply->type != REDIS_REPLY_ERROR) {
                ngx_http_throttle_redis_count_error(
                    zone->redis->metrics, NGX_HTTP_THROTTLE_REDIS_ERR_REPLY);
            }

            if (ngx_http_throttle_log_due(&zone->redis_log, ngx_current_msec,
                                          1000)) {
                ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                              "throttle zone \"%V\": Redis answered: %*s",
                              &zone->name,
                              ngx_min(decoded.message.size(), (size_t) 200),
                              decoded.message.data());
            }
        }
    }

    if (--ctx->replies_awaited == 0) {
        ctx->resume_handler(ctx);
    }
}

/* The key's name in Redis, as the zone's scripts name it, in the
 * request's pool; false if out of memory. */
static bool
ngx_http_throttle_strict_key(ngx_pool_t                *pool,
                             ngx_http_throttle_check_t *check) noexcept
{
    ngx_http_throttle_zone_t *zone = check->lookup.zone;
    u_char                   *p;

    p = (u_char *) ngx_pnalloc(
        pool,
        throttle::max_redis_key_len(zone->redis->prefix.len, zone->name.len));
    if (p == NULL) {
        return false;
    }

    check->redis_key.data = p;
    check->redis_key.len = throttle::format_redis_key(
        (char *) p, ngx_http_throttle_sv(zone->redis->prefix),
        ngx_http_throttle_sv(zone->name), check->lookup.key,
        zone->policy.redis_hash_tag());
    return true;
}

/* Sends a script call for the check's key. */
static ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_strict_eval(ngx_http_throttle_check_t      *check,
                              const throttle::ScriptCall     &script,
                              ngx_http_throttle_redis_done_pt done,
                              void                           *data) noexcept
{
    ngx_http_throttle_redis_call_t call;

    call.script = script.script;
    call.keys = &check->redis_key;
    call.nkeys = 1;
    call.argv = script.args.values;
    call.nargv = script.args.n;
    call.timeout = 0;

    return ngx_http_throttle_redis_eval(check->lookup.zone->redis, &call, done,
                                        data);
}

/* Sends the call of each zone Redis decides; returns how many are
 * awaited. A call that cannot be sent fails its check. */
ngx_uint_t
ngx_http_throttle_strict_send(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_pool_cleanup_t        *cln;
    ngx_http_request_t        *r = ctx->request;
    ngx_http_throttle_check_t *check;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return 0;
    }

    cln->handler = ngx_http_throttle_strict_cleanup;
    cln->data = ctx;

    ctx->replies_awaited = 1; /* no resuming before every command is out */

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        if (!ctx->decision.asks_redis(i)) {
            continue;
        }

        if (ngx_http_throttle_strict_key(r->pool, check)) {
            check->sent_at = check->lookup.zone->policy.now_us();
            check->cmd = ngx_http_throttle_strict_eval(
                check,
                check->lookup.policy->decision_call(check->lookup.part->cost),
                ngx_http_throttle_strict_done, check);
        }

        if (check->cmd) {
            ctx->replies_awaited++;
        } else {
            ctx->decision.failed(i);
        }
    }

    return --ctx->replies_awaited;
}

/* The request is decided: each zone Redis decided learns from its answer,
 * or has it given back (throttle::RequestDecision::follow_up()). */
void
ngx_http_throttle_strict_follow_up(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_check_t *check;
    ngx_log_t                 *log = ctx->request->connection->log;

    for (i = 0; i < ctx->nchecks; i++) {
        check = &ctx->checks[i];

        switch (ctx->decision.follow_up(i)) {
        case throttle::FollowUp::remember:
            ngx_http_throttle_remember(&check->lookup, check->sent_at, log);
            break;

        case throttle::FollowUp::refund:
            ngx_http_throttle_forget_answers(
                &check->lookup, check->lookup.zone->redis->timeout);
            (void) ngx_http_throttle_strict_eval(
                check,
                check->lookup.policy->refund_call(check->lookup.part->cost,
                                                  check->tokens),
                NULL, NULL);
            break;

        case throttle::FollowUp::none:
            break;
        }

        /* after the answer is remembered: the requests that waited for
         * it are decided from it */
        ngx_http_throttle_flight_land(check, ctx->decision.check(i).failed);
    }
}

/* Whether Redis took a settle script: an error reply, or none in time
 * (the transport has logged why), loses it. */
bool
ngx_http_throttle_strict_settle_taken(const redisReply *reply) noexcept
{
    return reply != NULL && reply->type != REDIS_REPLY_ERROR;
}

/* A settle's answer, whenever it comes: only counted. The zone outlives
 * it (a worker's commands end before its configuration goes). */
static void
ngx_http_throttle_strict_settled(void *data, redisReply *reply,
                                 ngx_http_throttle_settle_e result) noexcept
{
    ngx_http_throttle_zone_t *zone = (ngx_http_throttle_zone_t *) data;

    zone->settles_in_flight--;

    if (!ngx_http_throttle_strict_settle_taken(reply)) {
        result = NGX_HTTP_THROTTLE_SETTLE_LOST;
    }

    ngx_http_throttle_metrics_settled(zone, result);
}

static void
ngx_http_throttle_strict_charged(void *data, redisReply *reply, const char *,
                                 bool) noexcept
{
    ngx_http_throttle_strict_settled(data, reply,
                                     NGX_HTTP_THROTTLE_SETTLE_CHARGED);
}

static void
ngx_http_throttle_strict_refunded(void *data, redisReply *reply, const char *,
                                  bool) noexcept
{
    ngx_http_throttle_strict_settled(data, reply,
                                     NGX_HTTP_THROTTLE_SETTLE_REFUNDED);
}

/* Settles a zone's worker may have on their way to Redis. Nothing waits
 * for a settle, so under a load Redis cannot keep up with, they would
 * queue without bound in front of the decisions, which then time out;
 * beyond this many, a settle is lost (counted, logged) instead. */
#define NGX_HTTP_THROTTLE_SETTLES_IN_FLIGHT 128

/*
 * settle= in a strict zone, from the log phase: the key is charged
 * delta_units more, or given them back, by one script at Redis's clock
 * (throttle::Policy::settle_call()). Nothing waits for it: the command
 * owns a copy of the key and the numbers, and its answer is counted when
 * it comes (a worker that exits meanwhile waits for it, within the
 * backend's timeout). NGX_ERROR if it could not be sent, or too many are
 * on their way already (counted lost).
 */
ngx_int_t
ngx_http_throttle_strict_settle(ngx_http_request_t        *r,
                                ngx_http_throttle_check_t *check,
                                int64_t                    delta_units) noexcept
{
    ngx_http_throttle_zone_t *zone = check->lookup.zone;

    if (zone->settles_in_flight >= NGX_HTTP_THROTTLE_SETTLES_IN_FLIGHT) {
        if (ngx_http_throttle_log_due(&zone->settle_log, ngx_current_msec,
                                      1000)) {
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "throttle zone \"%V\": %ui settles on their way "
                          "to Redis already: settles are lost",
                          &zone->name, zone->settles_in_flight);
        }
        return NGX_ERROR;
    }

    /* counted before it goes: its answer may come at once */
    zone->settles_in_flight++;

    if (ngx_http_throttle_strict_settle_send(
            r->pool, check, delta_units,
            delta_units > 0 ? ngx_http_throttle_strict_charged
                            : ngx_http_throttle_strict_refunded,
            zone)
        == NULL)
    {
        zone->settles_in_flight--;
        return NGX_ERROR;
    }

    return NGX_OK;
}

/*
 * Sends the script that settles the check's key by delta_units (neither
 * 0 nor INT64_MIN; check->tokens: the decision script's, for a refund),
 * at Redis's clock (throttle::Policy::settle_call()); "done" has its
 * answer. NULL if it could not be sent. Until Redis has run it, the zone
 * keeps none of Redis's answers about the key: they may tell of it before.
 */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_strict_settle_send(ngx_pool_t                *pool,
                                     ngx_http_throttle_check_t *check,
                                     int64_t                    delta_units,
                                     ngx_http_throttle_redis_done_pt done,
                                     void *data) noexcept
{
    ngx_http_throttle_zone_t *zone = check->lookup.zone;

    if (check->redis_key.len == 0 && !ngx_http_throttle_strict_key(pool, check))
    {
        return NULL;
    }

    ngx_http_throttle_forget_answers(&check->lookup, zone->redis->timeout);

    return ngx_http_throttle_strict_eval(
        check, check->lookup.policy->settle_call(delta_units, check->tokens),
        done, data);
}

/* concurrent=: keeps the place of the check's request for another lease
 * (throttle::Policy::renew_call()); "done" has its answer, nothing waits
 * for it. NULL if it could not be sent (the transport says why). */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_strict_renew(ngx_http_throttle_check_t      *check,
                               ngx_http_throttle_redis_done_pt done,
                               void                           *data) noexcept
{
    return ngx_http_throttle_strict_eval(
        check, check->lookup.zone->policy.renew_call(check->tokens), done,
        data);
}

/* throttle_api's reset, in a strict or async zone: the script that
 * deletes the check's key in Redis (throttle::Policy::reset_call()), by
 * the name the zone's own scripts give it; "done" has its answer. NULL if
 * it could not be sent. */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_reset_send(ngx_pool_t *pool, ngx_http_throttle_check_t *check,
                             ngx_http_throttle_redis_done_pt done,
                             void                           *data) noexcept
{
    if (!ngx_http_throttle_strict_key(pool, check)) {
        return NULL;
    }

    return ngx_http_throttle_strict_eval(
        check, check->lookup.zone->policy.reset_call(), done, data);
}
