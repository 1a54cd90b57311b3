/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api's top=: who a zone is limiting now (docs/api.md, "Who is
 * being limited").
 *
 *     GET /throttle?zone=reply&top=3
 *
 *     {"zone":"reply","size":64,"decay_ms":60000,"now_ms":1764205262123,
 *      "keys":[{"key":"alice","count":120,"error":0,
 *               "first_ms":1764205201007,"last_ms":1764205262100},...]}
 *
 * The keys the zone rejected most, recently, from its table of heavy
 * hitters (ngx_http_throttle_zone_top.cpp), highest count first. It reads
 * and charges nothing: a concurrent= zone, which a decision cannot ask,
 * may be read too.
 */

#include "ngx_http_throttle_api_json.h"

static ngx_str_t ngx_http_throttle_api_top_name = ngx_string("top");
static ngx_str_t ngx_http_throttle_api_zone_name = ngx_string("zone");

/* Splits the query string's next "name=value" (from *p, which it moves
 * past it): false at the end. */
static bool
ngx_http_throttle_api_next_arg(u_char **p, u_char *end, ngx_str_t *name,
                               ngx_str_t *raw) noexcept
{
    u_char *amp, *eq;

    for (/* void */; *p < end; *p = amp + 1) {
        amp = ngx_strlchr(*p, end, '&');
        amp = amp ? amp : end;

        if (amp == *p) {
            continue; /* "&&" */
        }

        eq = ngx_strlchr(*p, amp, '=');
        name->data = *p;
        name->len = (eq ? eq : amp) - *p;
        raw->data = eq ? eq + 1 : amp;
        raw->len = amp - raw->data;

        *p = amp < end ? amp + 1 : end;
        return true;
    }

    return false;
}

bool
ngx_http_throttle_api_asks_top(const ngx_str_t *args) noexcept
{
    u_char   *p = args->data;
    ngx_str_t name, raw;

    while (ngx_http_throttle_api_next_arg(&p, args->data + args->len, &name,
                                          &raw)) {
        if (ngx_http_throttle_str_eq(name, ngx_http_throttle_api_top_name)) {
            return true;
        }
    }

    return false;
}

/* The query string's zone= and top=, each once, and nothing else: a
 * check's parameters (key=, cost=...) ask for a decision, which top=
 * does not make. */
static ngx_int_t
ngx_http_throttle_api_top_args(ngx_http_throttle_api_call_t *call,
                               ngx_str_t *zone, ngx_str_t *top) noexcept
{
    u_char    *p, *end;
    ngx_int_t  rc;
    ngx_str_t  name, raw, *value;
    ngx_str_t *args = &call->request->args;

    p = args->data;
    end = args->data + args->len;

    while (ngx_http_throttle_api_next_arg(&p, end, &name, &raw)) {
        value = ngx_http_throttle_str_eq(name, ngx_http_throttle_api_top_name)
            ? top
            : ngx_http_throttle_str_eq(name, ngx_http_throttle_api_zone_name)
            ? zone
            : NULL;

        if (value == NULL) {
            return ngx_http_throttle_api_field(&name)
                    < NGX_HTTP_THROTTLE_API_NFIELDS
                ? ngx_http_throttle_api_refuse(
                    call,
                    "\"top\" cannot go with \"%V\": top= reads a zone's "
                    "most rejected keys, it checks none",
                    &name)
                : ngx_http_throttle_api_refuse(
                    call, "unknown parameter \"%*s\"",
                    ngx_min(name.len, NGX_HTTP_THROTTLE_API_QUOTE), name.data);
        }

        if (value->data) {
            return ngx_http_throttle_api_refuse(
                call, "parameter \"%V\" is repeated", &name);
        }

        rc = ngx_http_throttle_api_unescape(call->request->pool, &raw, value);
        if (rc == NGX_DECLINED) {
            return ngx_http_throttle_api_refuse(
                call,
                "parameter \"%V\" has a '%%' not followed by two hex digits",
                &name);
        }
        if (rc != NGX_OK) {
            return rc;
        }
    }

    return NGX_OK;
}

/* The zone asked, and how many of its keys: from 1 to as many as its
 * table tracks. */
static ngx_int_t
ngx_http_throttle_api_top_read(ngx_http_throttle_api_call_t *call,
                               ngx_http_throttle_zone_t    **zone,
                               ngx_uint_t                   *n) noexcept
{
    ngx_int_t rc;
    ngx_str_t name = ngx_null_string, top = ngx_null_string;
    size_t    size;

    rc = ngx_http_throttle_api_top_args(call, &name, &top);
    if (rc != NGX_OK) {
        return rc;
    }

    if (name.data == NULL) {
        return ngx_http_throttle_api_refuse(call, "missing \"zone\"");
    }

    *zone = ngx_http_throttle_api_zone(call->tlcf, &name);
    if (*zone == NULL) {
        return ngx_http_throttle_api_refuse(
            call, "unknown zone \"%*s\": not one of this endpoint's zones=",
            ngx_min(name.len, NGX_HTTP_THROTTLE_API_QUOTE), name.data);
    }

    size = (*zone)->sh->top->size;
    auto parsed = throttle::parse_count(ngx_http_throttle_sv(top), INT64_MAX);

    if (!parsed || *parsed.value == 0) {
        return ngx_http_throttle_api_refuse(
            call, "top \"%*s\" is not an integer from 1 to %uz",
            ngx_min(top.len, NGX_HTTP_THROTTLE_API_QUOTE), top.data, size);
    }

    if ((uint64_t) *parsed.value > size) {
        return ngx_http_throttle_api_refuse(
            call,
            "top \"%*s\" is more keys than zone \"%V\" tracks: at most %uz",
            ngx_min(top.len, NGX_HTTP_THROTTLE_API_QUOTE), top.data,
            &(*zone)->name, size);
    }

    *n = (ngx_uint_t) *parsed.value;
    return NGX_OK;
}

/* A key as its entry names it: the bytes the zone stores (cut at
 * throttle::kTopNameMax), or, for a long key stored as its SHA-256
 * digest, the digest in hex. */
static bool
ngx_http_throttle_api_top_key(ngx_http_throttle_api_writer_t &w,
                              ngx_pool_t                     *pool,
                              const throttle::TopEntry       &e) noexcept
{
    u_char hex[2 * throttle::kTopNameMax];

    w.Key("key");

    if (!e.hashed) {
        return ngx_http_throttle_api_write_string(w, pool, e.name, e.name_len);
    }

    return w.String((const char *) hex,
                    (rapidjson::SizeType)(
                        ngx_hex_dump(hex, (u_char *) e.name, e.name_len) - hex),
                    true);
}

/* Numbers of the answer, by name. */
typedef struct {
    const char *name;
    int64_t     value;
} ngx_http_throttle_api_figure_t;

template <size_t N>
static void
ngx_http_throttle_api_top_figures(
    ngx_http_throttle_api_writer_t &w,
    const ngx_http_throttle_api_figure_t (&figures)[N]) noexcept
{
    for (const auto &f : figures) {
        w.Key(f.name);
        w.Int64(f.value);
    }
}

static bool
ngx_http_throttle_api_top_entry(ngx_http_throttle_api_writer_t &w,
                                ngx_pool_t                     *pool,
                                const throttle::TopEntry       &e) noexcept
{
    w.StartObject();

    if (!ngx_http_throttle_api_top_key(w, pool, e)) {
        return false;
    }

    if (e.hashed) {
        w.Key("hashed");
        w.Bool(true);
    } else if (e.key_len > e.name_len) {
        w.Key("truncated");
        w.Bool(true);
    }

    const ngx_http_throttle_api_figure_t figures[] = {{"count", e.count},
                                                      {"error", e.error},
                                                      {"first_ms", e.first_ms},
                                                      {"last_ms", e.last_ms}};

    ngx_http_throttle_api_top_figures(w, figures);

    return w.EndObject();
}

/* The answer: the zone, its table's size and decay, when it was read, and
 * its first `n` keys (fewer if it holds fewer). */
static ngx_int_t
ngx_http_throttle_api_top_answer(ngx_http_throttle_api_call_t *call,
                                 ngx_http_throttle_zone_t *zone, ngx_uint_t n,
                                 ngx_str_t *json) noexcept
{
    ngx_uint_t                     i;
    ngx_pool_t                    *pool = call->request->pool;
    rapidjson::StringBuffer        sb;
    ngx_http_throttle_top_copy_t   top;
    ngx_http_throttle_api_writer_t w(sb);

    if (ngx_http_throttle_top_copy(zone, pool, &top) != NGX_OK) {
        return NGX_ERROR;
    }

    w.StartObject();
    w.Key("zone");
    w.String((const char *) zone->name.data,
             (rapidjson::SizeType) zone->name.len);
    const ngx_http_throttle_api_figure_t figures[] = {
        {"size", (int64_t) top.size},
        {"decay_ms", top.decay_ms},
        {"now_ms", top.now_ms}};

    ngx_http_throttle_api_top_figures(w, figures);
    w.Key("keys");
    w.StartArray();

    for (i = 0; i < ngx_min(n, top.used); i++) {
        if (!ngx_http_throttle_api_top_entry(w, pool, top.entries[i])) {
            return NGX_ERROR;
        }
    }

    w.EndArray();
    w.EndObject();

    return ngx_http_throttle_api_copy_out(pool, sb, json);
}

ngx_int_t
ngx_http_throttle_api_top(ngx_http_throttle_api_call_t *call) noexcept
{
    ngx_int_t                 rc;
    ngx_str_t                 json;
    ngx_uint_t                n = 0;
    ngx_http_throttle_zone_t *zone = NULL;

    rc = ngx_http_throttle_api_top_read(call, &zone, &n);

    if (rc == NGX_DECLINED) {
        return ngx_http_throttle_api_send_error(
            call->request, NGX_HTTP_BAD_REQUEST, &call->error);
    }

    if (rc != NGX_OK
        || ngx_http_throttle_api_top_answer(call, zone, n, &json) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_api_send(call->request, NGX_HTTP_OK, &json);
}
