/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api: what its files share. ngx_http_throttle_api.cpp has the
 * directive and the handler; _api_call.cpp checks a call's checks and
 * reads a query string's; _api_json.cpp reads the JSON bodies and writes
 * the answers; _api_settle.cpp settles the checks of a settle call.
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

/* A call: the checks it asks for, in the caller's order, or why it is
 * refused. A settle call's checks all settle (settles[i] beside
 * checks[i], whose cost is unused); a decision call's none. */
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
};

/*
 * The functions that read a call return NGX_OK; NGX_DECLINED when the
 * call is refused (call->error says why: a 400); NGX_ERROR when memory
 * ran out.
 */

/* ngx_http_throttle_api_call.cpp */
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

#endif /* NGX_HTTP_THROTTLE_API_H */
