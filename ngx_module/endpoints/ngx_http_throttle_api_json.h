/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's JSON text: what ngx_http_throttle_api_json.cpp (the
 * bodies read, the refusals) and _api_answer.cpp (the answers) share.
 */

#ifndef NGX_HTTP_THROTTLE_API_JSON_H
#define NGX_HTTP_THROTTLE_API_JSON_H

/*
 * RapidJSON asserts its caller's use of its API (a string read from a
 * value that is not one), never its input: every type is checked before
 * it is read. An assert must neither abort the worker nor throw (the glue
 * has no exceptions), so it is nothing.
 */
#define RAPIDJSON_ASSERT(x) ((void) 0)

#include "ngx_http_throttle_api.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

typedef rapidjson::Writer<rapidjson::StringBuffer>
    ngx_http_throttle_api_writer_t;

/* Writes bytes as a JSON string, each invalid UTF-8 byte as U+FFFD. */
bool ngx_http_throttle_api_write_string(ngx_http_throttle_api_writer_t &w,
                                        ngx_pool_t *pool, const u_char *data,
                                        size_t len) noexcept;

/* The writer's text, copied into the pool. */
ngx_int_t ngx_http_throttle_api_copy_out(ngx_pool_t              *pool,
                                         rapidjson::StringBuffer &sb,
                                         ngx_str_t *json) noexcept;

#endif /* NGX_HTTP_THROTTLE_API_JSON_H */
