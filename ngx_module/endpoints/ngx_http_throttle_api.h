/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api: what its files share. ngx_http_throttle_api.cpp has the
 * directive and the handler; _api_call.cpp checks a call's checks and
 * reads a query string's; _api_json.cpp reads the JSON bodies and writes
 * the answers.
 */

#ifndef NGX_HTTP_THROTTLE_API_H
#define NGX_HTTP_THROTTLE_API_H

#include "ngx_http_throttle_endpoints.h"
#include "ngx_http_throttle_request.h"

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
    NGX_HTTP_THROTTLE_API_NFIELDS /* none of them */
};

/* A call: the checks it asks for, in the caller's order, or why it is
 * refused. */
typedef struct {
    ngx_http_request_t           *request;
    ngx_http_throttle_loc_conf_t *tlcf;
    ngx_http_throttle_given_t     checks[NGX_HTTP_THROTTLE_API_MAX_CHECKS];
    ngx_uint_t                    nchecks;
    ngx_str_t                     error; /* refused: why, for the caller */
} ngx_http_throttle_api_call_t;

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
ngx_int_t  ngx_http_throttle_api_add(ngx_http_throttle_api_call_t *call,
                                     const ngx_str_t *zone, const ngx_str_t *key,
                                     int64_t cost, int64_t delay_units) noexcept;

/* ngx_http_throttle_api_json.cpp */
ngx_int_t ngx_http_throttle_api_read_json(ngx_http_throttle_api_call_t *call,
                                          const ngx_str_t *body) noexcept;
ngx_int_t ngx_http_throttle_api_answer(ngx_http_throttle_api_call_t  *call,
                                       const ngx_http_throttle_ctx_t *ctx,
                                       bool allowed, ngx_str_t *json) noexcept;
ngx_int_t ngx_http_throttle_api_error(ngx_pool_t *pool, const ngx_str_t *error,
                                      ngx_str_t *json) noexcept;

#endif /* NGX_HTTP_THROTTLE_API_H */
