/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api: what its files share. ngx_http_throttle_api.cpp has the
 * directive and the handler; _api_call.cpp checks a call's checks and
 * reads a query string's; _api_json.cpp reads the JSON bodies and writes
 * the answers; _api_settle.cpp settles the checks of a settle call;
 * _api_reset.cpp resets the key of a DELETE.
 * _api_top.cpp answers top=, a zone's most rejected keys.
 */

#ifndef NGX_HTTP_THROTTLE_API_H
#define NGX_HTTP_THROTTLE_API_H

#include "ngx_http_throttle_endpoints.h"
#include "ngx_http_throttle_request.h"

#include "throttle/reservation.hpp"

/* What one call may ask. */
#define NGX_HTTP_THROTTLE_API_MAX_CHECKS 16
#define NGX_HTTP_THROTTLE_API_MAX_KEY 4096
#define NGX_HTTP_THROTTLE_API_MAX_BODY 16384

/* The most bytes of a caller's value an error message quotes. */
#define NGX_HTTP_THROTTLE_API_QUOTE 64

/* The fields of a check, in a GET's query string or a JSON object
 * (ngx_http_throttle_api_field() finds one by its name). */
enum {
    NGX_HTTP_THROTTLE_API_ZONE,
    NGX_HTTP_THROTTLE_API_KEY,
    NGX_HTTP_THROTTLE_API_COST,
    NGX_HTTP_THROTTLE_API_DELAY,
    NGX_HTTP_THROTTLE_API_SETTLE,
    NGX_HTTP_THROTTLE_API_RESERVATION,
    NGX_HTTP_THROTTLE_API_NFIELDS /* none of them */
};

/* A check as the caller asked it, from a query string or a JSON object,
 * before it is checked. */
typedef struct {
    const ngx_str_t *zone;         /* NULL: not given */
    const ngx_str_t *key;          /* NULL: not given */
    int64_t          cost;         /* -1: not given (1) */
    int64_t          delay_units;  /* throttle::kNoDelay: not given */
    int64_t          settle_units; /* -1: not given, the check decides */
    const ngx_str_t *reservation;  /* NULL: not given */
} ngx_http_throttle_api_asked_t;

/* A settle check: the units used, what was reserved for them, and the key
 * it settles (its zone and Redis call; lookup.part is unused). */
typedef struct ngx_http_throttle_api_call_s ngx_http_throttle_api_call_t;

typedef struct {
    ngx_http_throttle_api_call_t *call;
    int64_t                       settled_units;
    int64_t                       delta_units; /* charged; < 0: given back */
    bool                          reserved;
    throttle::Reservation         reservation;
    ngx_http_throttle_check_t     check;
    ngx_http_throttle_settle_e    result;
    ngx_str_t                     lost; /* a strict zone's: why, or empty */
} ngx_http_throttle_api_settle_t;

/* A reset (DELETE): its key (its zone and Redis call; lookup.part is
 * unused), what it dropped, and why Redis did not delete the key, or
 * empty. */
typedef struct {
    ngx_http_throttle_check_t check;
    int64_t                   units_dropped; /* an async key's, not synced */
    bool                      answered;      /* Redis's answer is in */
    ngx_str_t                 failed;
} ngx_http_throttle_api_reset_t;

/* A call: the checks it asks for, in the caller's order, or why it is
 * refused. A settle call's checks all settle (settles[i] beside
 * checks[i], whose cost is unused); a decision call's none. A reset
 * call (a DELETE) has one check, its key, whose cost is unused. */
struct ngx_http_throttle_api_call_s {
    ngx_http_request_t           *request;
    ngx_http_throttle_loc_conf_t *tlcf;
    ngx_http_throttle_given_t     checks[NGX_HTTP_THROTTLE_API_MAX_CHECKS];
    ngx_uint_t                    nchecks;
    ngx_str_t                     error; /* refused: why, for the caller */
    bool                          settles;
    ngx_uint_t                    replies_awaited; /* strict settles */
    ngx_http_throttle_api_settle_t
         settles_asked[NGX_HTTP_THROTTLE_API_MAX_CHECKS];
    bool resets;
    ngx_http_throttle_api_reset_t reset;
};

/*
 * The functions that read a call return NGX_OK; NGX_DECLINED when the
 * call is refused (call->error says why: a 400); NGX_ERROR when memory
 * ran out.
 */

/* ngx_http_throttle_api_answer.cpp: refuses a request before its body is
 * read (the body is discarded) */
ngx_int_t ngx_http_throttle_api_turn_away(ngx_http_request_t *r,
                                          ngx_uint_t          status,
                                          const ngx_str_t    *error) noexcept;

/* ngx_http_throttle_api_call.cpp; reset_asked(): a DELETE's one key,
 * checked before it is added as any check */
bool      ngx_http_throttle_api_has_body(ngx_http_request_t *r) noexcept;
ngx_int_t ngx_http_throttle_api_reset_asked(
    ngx_http_throttle_api_call_t        *call,
    const ngx_http_throttle_api_asked_t *asked,
    const ngx_http_throttle_zone_t      *zone) noexcept;
ngx_int_t
ngx_http_throttle_api_read_args(ngx_http_throttle_api_call_t *call) noexcept;
ngx_uint_t ngx_http_throttle_api_field(const ngx_str_t *name) noexcept;
ngx_int_t  ngx_http_throttle_api_refuse(ngx_http_throttle_api_call_t *call,
                                        const char *fmt, ...) noexcept;
ngx_int_t
          ngx_http_throttle_api_add(ngx_http_throttle_api_call_t        *call,
                                    const ngx_http_throttle_api_asked_t *asked) noexcept;
ngx_int_t ngx_http_throttle_api_quote(ngx_http_throttle_api_call_t *call,
                                      const char *what, const ngx_str_t *value,
                                      const char *why) noexcept;
ngx_http_throttle_zone_t           *
ngx_http_throttle_api_zone(ngx_http_throttle_loc_conf_t *tlcf,
                                     const ngx_str_t              *name) noexcept;
ngx_int_t ngx_http_throttle_api_unescape(ngx_pool_t *pool, const ngx_str_t *raw,
                                         ngx_str_t *value) noexcept;

/* ngx_http_throttle_api_json.cpp */
ngx_int_t ngx_http_throttle_api_read_json(ngx_http_throttle_api_call_t *call,
                                          const ngx_str_t *body) noexcept;
/* ctx: the decision's, or NULL for a settle call's answer */
ngx_int_t ngx_http_throttle_api_answer(ngx_http_throttle_api_call_t  *call,
                                       const ngx_http_throttle_ctx_t *ctx,
                                       bool allowed, ngx_str_t *json) noexcept;
ngx_int_t ngx_http_throttle_api_error(ngx_pool_t *pool, const ngx_str_t *error,
                                      ngx_str_t *json) noexcept;

/* ngx_http_throttle_api_answer.cpp: answers, which the handler, or the
 * request's finalization, is given */
ngx_int_t ngx_http_throttle_api_send(ngx_http_request_t *r, ngx_uint_t status,
                                     ngx_str_t *json) noexcept;
ngx_int_t ngx_http_throttle_api_send_error(ngx_http_request_t *r,
                                           ngx_uint_t          status,
                                           const ngx_str_t    *error) noexcept;

/* ngx_http_throttle_api_settle.cpp: a settle call's checks, applied and
 * answered; NGX_DONE while Redis answers (the request is finalized then) */
ngx_int_t
ngx_http_throttle_api_settle(ngx_http_throttle_api_call_t *call) noexcept;
/* Why Redis did not run a script (its answer, or none in time), for the
 * caller; "would": what it may still have done, if it was sent. */
ngx_int_t ngx_http_throttle_api_redis_failure(ngx_pool_t       *pool,
                                              const redisReply *reply,
                                              const char *err, bool sent,
                                              const char *would,
                                              ngx_str_t  *why) noexcept;

/* ngx_http_throttle_api_reset.cpp: a DELETE's key reset; NGX_DONE while
 * Redis answers (the request is finalized then) */
ngx_int_t
ngx_http_throttle_api_reset(ngx_http_throttle_api_call_t *call) noexcept;
/* Whether the request is a DELETE the location resets keys for, with its
 * key in a body (read as a POST's) */
bool ngx_http_throttle_api_reset_body(ngx_http_request_t *r) noexcept;
/* The methods the location answers but POST (NGX_HTTP_GET...), and the
 * 405 of the others */
ngx_uint_t ngx_http_throttle_api_methods(ngx_http_request_t *r) noexcept;
ngx_int_t  ngx_http_throttle_api_not_allowed(ngx_http_request_t *r) noexcept;

/* ngx_http_throttle_api_top.cpp: GET ?zone=Z&top=N, a zone's most
 * rejected keys; asks_top() says whether a query string asks it */
bool ngx_http_throttle_api_asks_top(const ngx_str_t *args) noexcept;
ngx_int_t
ngx_http_throttle_api_top(ngx_http_throttle_api_call_t *call) noexcept;

#endif /* NGX_HTTP_THROTTLE_API_H */
