/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's JSON, read with RapidJSON: the checks of a POST's body;
 * and what every answer's text needs (the checks' answers are written by
 * ngx_http_throttle_api_answer.cpp), the refusals:
 *
 *     {"error":"missing \"key\""}
 *
 * A key is bytes; JSON text is UTF-8. A key (or a quoted value in an
 * error) comes back with each byte that is not part of a valid UTF-8
 * sequence as U+FFFD, so that every answer is valid JSON.
 */

#include "ngx_http_throttle_api_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

/* The iterative parser: a deeply nested body costs heap, not the
 * worker's stack; the body must be valid UTF-8, as JSON is. */
static const unsigned ngx_http_throttle_api_parse_flags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

/* How long the UTF-8 sequence at "p" is, or 0 if it is not a valid one
 * (a stray continuation byte, an overlong form, a surrogate, beyond
 * U+10FFFF, cut short). */
static size_t
ngx_http_throttle_api_utf8_len(const u_char *p, const u_char *end) noexcept
{
    size_t len, i;
    u_char lo = 0x80, hi = 0xbf;
    u_char c = *p;

    if (c < 0x80) {
        return 1;
    }

    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;

    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = (c == 0xe0) ? 0xa0 : 0x80; /* overlong */
        hi = (c == 0xed) ? 0x9f : 0xbf; /* surrogates */

    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = (c == 0xf0) ? 0x90 : 0x80; /* overlong */
        hi = (c == 0xf4) ? 0x8f : 0xbf; /* beyond U+10FFFF */

    } else {
        return 0;
    }

    if ((size_t) (end - p) < len || p[1] < lo || p[1] > hi) {
        return 0;
    }

    for (i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) {
            return 0;
        }
    }

    return len;
}

/* Writes bytes as a JSON string, each invalid UTF-8 byte as U+FFFD; the
 * writer escapes quotes, backslashes and control characters. */
bool
ngx_http_throttle_api_write_string(ngx_http_throttle_api_writer_t &w,
                                   ngx_pool_t *pool, const u_char *data,
                                   size_t len) noexcept
{
    size_t        n;
    u_char       *copy, *d;
    const u_char *p, *end = data + len;

    static const u_char replacement[] = {0xef, 0xbf, 0xbd}; /* U+FFFD */

    for (p = data; p < end; p += n) {
        n = ngx_http_throttle_api_utf8_len(p, end);
        if (n == 0) {
            break;
        }
    }

    if (p == end) {
        return w.String((const char *) data, (rapidjson::SizeType) len, true);
    }

    /* at most 3 bytes for each byte */
    copy = (u_char *) ngx_pnalloc(pool, 3 * len);
    if (copy == NULL) {
        return false;
    }

    for (p = data, d = copy; p < end; p += n) {
        n = ngx_http_throttle_api_utf8_len(p, end);

        if (n == 0) {
            d = ngx_cpymem(d, replacement, sizeof(replacement));
            n = 1;

        } else {
            d = ngx_cpymem(d, p, n);
        }
    }

    return w.String((const char *) copy, (rapidjson::SizeType)(d - copy), true);
}

/* A member of a check's object into fields[], by its name: each at most
 * once. */
static ngx_int_t
ngx_http_throttle_api_member(ngx_http_throttle_api_call_t *call,
                             const rapidjson::Value       &name,
                             const rapidjson::Value       &value,
                             const rapidjson::Value      **fields) noexcept
{
    ngx_uint_t i;
    ngx_str_t  given;

    given.data = (u_char *) name.GetString();
    given.len = name.GetStringLength();

    i = ngx_http_throttle_api_field(&given);

    if (i == NGX_HTTP_THROTTLE_API_NFIELDS) {
        return ngx_http_throttle_api_refuse(
            call, "unknown field \"%*s\"",
            ngx_min(given.len, NGX_HTTP_THROTTLE_API_QUOTE), given.data);
    }

    if (fields[i]) {
        return ngx_http_throttle_api_refuse(call, "field \"%V\" is repeated",
                                            &given);
    }

    fields[i] = &value;
    return NGX_OK;
}

/* A string field's bytes; the key's copied into the pool, since the
 * document is gone once the call is read. */
static ngx_int_t
ngx_http_throttle_api_string(ngx_http_throttle_api_call_t *call,
                             const rapidjson::Value *value, const char *name,
                             bool copy, ngx_str_t *s) noexcept
{
    if (!value->IsString()) {
        return ngx_http_throttle_api_refuse(call, "\"%s\" must be a string",
                                            name);
    }

    s->len = value->GetStringLength();
    s->data = (u_char *) value->GetString();

    if (copy) {
        s->data = ngx_pstrdup(call->request->pool, s);
        if (s->data == NULL && s->len) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

/* A count field: "unset" when absent, else an integer from 0 to max
 * (1.0 and "1" are not). */
static ngx_int_t
ngx_http_throttle_api_count(ngx_http_throttle_api_call_t *call,
                            const rapidjson::Value *value, const char *name,
                            int64_t max, int64_t unset, int64_t *count) noexcept
{
    if (value == NULL) {
        *count = unset;
        return NGX_OK;
    }

    if (!value->IsUint64() || value->GetUint64() > (uint64_t) max) {
        return ngx_http_throttle_api_refuse(
            call, "\"%s\" is not an integer from 0 to %L", name, max);
    }

    *count = (int64_t) value->GetUint64();
    return NGX_OK;
}

/* One check, {"zone":"...","key":"...","cost":N} (cost 1 when absent), or
 * {"zone":"...","key":"...","settle":N,"reservation":"..."}. */
static ngx_int_t
ngx_http_throttle_api_json_check(ngx_http_throttle_api_call_t *call,
                                 const rapidjson::Value       &check) noexcept
{
    ngx_int_t                     rc;
    ngx_str_t                     strings[NGX_HTTP_THROTTLE_API_NFIELDS];
    ngx_uint_t                    i;
    ngx_http_throttle_api_asked_t asked;
    const rapidjson::Value       *fields[NGX_HTTP_THROTTLE_API_NFIELDS] = {};

    /* the string fields, and whether the document's bytes need a copy
     * (it is gone once the call is read) */
    static const struct {
        ngx_uint_t  field;
        const char *name;
        bool        copy;
    } texts[] = {{NGX_HTTP_THROTTLE_API_ZONE, "zone", false},
                 {NGX_HTTP_THROTTLE_API_KEY, "key", true},
                 {NGX_HTTP_THROTTLE_API_RESERVATION, "reservation", false}};

    if (!check.IsObject()) {
        return ngx_http_throttle_api_refuse(call, "a check must be an object");
    }

    for (auto m = check.MemberBegin(); m != check.MemberEnd(); ++m) {
        rc = ngx_http_throttle_api_member(call, m->name, m->value, fields);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    for (const auto &t : texts) {
        i = t.field;
        if (fields[i]) {
            rc = ngx_http_throttle_api_string(call, fields[i], t.name, t.copy,
                                              &strings[i]);
            if (rc != NGX_OK) {
                return rc;
            }
        }
    }

    asked.zone = fields[NGX_HTTP_THROTTLE_API_ZONE]
        ? &strings[NGX_HTTP_THROTTLE_API_ZONE]
        : NULL;
    asked.key = fields[NGX_HTTP_THROTTLE_API_KEY]
        ? &strings[NGX_HTTP_THROTTLE_API_KEY]
        : NULL;
    asked.reservation = fields[NGX_HTTP_THROTTLE_API_RESERVATION]
        ? &strings[NGX_HTTP_THROTTLE_API_RESERVATION]
        : NULL;

    rc = ngx_http_throttle_api_count(call, fields[NGX_HTTP_THROTTLE_API_COST],
                                     "cost", throttle::kMaxCost, -1,
                                     &asked.cost);
    if (rc == NGX_OK) {
        rc = ngx_http_throttle_api_count(
            call, fields[NGX_HTTP_THROTTLE_API_DELAY], "delay",
            throttle::kMaxDelay, throttle::kNoDelay, &asked.delay_units);
    }
    if (rc == NGX_OK) {
        rc = ngx_http_throttle_api_count(
            call, fields[NGX_HTTP_THROTTLE_API_SETTLE], "settle",
            throttle::kMaxCost, -1, &asked.settle_units);
    }

    return rc == NGX_OK ? ngx_http_throttle_api_add(call, &asked) : rc;
}

/* {"checks":[...]}: the checks, all of which must pass. */
static ngx_int_t
ngx_http_throttle_api_json_checks(ngx_http_throttle_api_call_t *call,
                                  const rapidjson::Value       &doc) noexcept
{
    ngx_int_t               rc;
    const rapidjson::Value &checks = doc["checks"];

    if (doc.MemberCount() != 1) {
        return ngx_http_throttle_api_refuse(
            call, "\"checks\" comes alone: the fields of a check go in it");
    }

    if (!checks.IsArray() || checks.Empty()) {
        return ngx_http_throttle_api_refuse(
            call, "\"checks\" must be an array of one check or more");
    }

    if (checks.Size() > NGX_HTTP_THROTTLE_API_MAX_CHECKS) {
        return ngx_http_throttle_api_refuse(call, "more than %d checks",
                                            NGX_HTTP_THROTTLE_API_MAX_CHECKS);
    }

    for (const auto &check : checks.GetArray()) {
        rc = ngx_http_throttle_api_json_check(call, check);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    return NGX_OK;
}

ngx_int_t
ngx_http_throttle_api_read_json(ngx_http_throttle_api_call_t *call,
                                const ngx_str_t              *body) noexcept
{
    rapidjson::Document doc;

    doc.Parse<ngx_http_throttle_api_parse_flags>((const char *) body->data,
                                                 body->len);

    if (doc.HasParseError()) {
        return ngx_http_throttle_api_refuse(
            call, "malformed JSON at byte %uz: %s", doc.GetErrorOffset(),
            rapidjson::GetParseError_En(doc.GetParseError()));
    }

    if (!doc.IsObject()) {
        return ngx_http_throttle_api_refuse(call,
                                            "the body must be a JSON object");
    }

    if (doc.HasMember("checks")) {
        return ngx_http_throttle_api_json_checks(call, doc);
    }

    return ngx_http_throttle_api_json_check(call, doc);
}

/* The writer's text, copied into the pool. */
ngx_int_t
ngx_http_throttle_api_copy_out(ngx_pool_t *pool, rapidjson::StringBuffer &sb,
                               ngx_str_t *json) noexcept
{
    json->len = sb.GetSize();
    json->data = (u_char *) ngx_pnalloc(pool, json->len);
    if (json->data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(json->data, sb.GetString(), json->len);
    return NGX_OK;
}

ngx_int_t
ngx_http_throttle_api_error(ngx_pool_t *pool, const ngx_str_t *error,
                            ngx_str_t *json) noexcept
{
    rapidjson::StringBuffer        sb;
    ngx_http_throttle_api_writer_t w(sb);

    w.StartObject();
    w.Key("error");
    if (!ngx_http_throttle_api_write_string(w, pool, error->data, error->len)) {
        return NGX_ERROR;
    }
    w.EndObject();

    return ngx_http_throttle_api_copy_out(pool, sb, json);
}
