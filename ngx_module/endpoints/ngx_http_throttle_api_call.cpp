/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api: a call's checks, as the caller gave them, checked against
 * the endpoint's zones= and the limits of a call whether they came in a
 * query string (read here) or in JSON (ngx_http_throttle_api_json.cpp).
 * Nothing is charged before every check of a call has been read and found
 * good.
 */

#include "ngx_http_throttle_api.h"

#include "throttle/parse.hpp"

/* The names of a check's fields, as NGX_HTTP_THROTTLE_API_ZONE... */
static const ngx_str_t ngx_http_throttle_api_fields[] = {
    ngx_string("zone"),  ngx_string("key"),    ngx_string("cost"),
    ngx_string("delay"), ngx_string("settle"), ngx_string("reservation")};

ngx_uint_t
ngx_http_throttle_api_field(const ngx_str_t *name) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < NGX_HTTP_THROTTLE_API_NFIELDS; i++) {
        if (ngx_http_throttle_str_eq(*name, ngx_http_throttle_api_fields[i])) {
            break;
        }
    }

    return i;
}

ngx_int_t
ngx_http_throttle_api_refuse(ngx_http_throttle_api_call_t *call,
                             const char                   *fmt, ...) noexcept
{
    u_char *p;
    va_list args;

    /* room for the longest: a zone that cannot delay, and why */
    static const size_t size = 512;

    p = (u_char *) ngx_pnalloc(call->request->pool, size);
    if (p == NULL) {
        return NGX_ERROR;
    }

    va_start(args, fmt);
    call->error.data = p;
    call->error.len = ngx_vslprintf(p, p + size, fmt, args) - p;
    va_end(args);

    return NGX_DECLINED;
}

/* The zone of zones= with that name, or NULL. */
ngx_http_throttle_zone_t *
ngx_http_throttle_api_zone(ngx_http_throttle_loc_conf_t *tlcf,
                           const ngx_str_t              *name) noexcept
{
    ngx_uint_t       i;
    ngx_shm_zone_t **zones = (ngx_shm_zone_t **) tlcf->api_zones->elts;

    for (i = 0; i < tlcf->api_zones->nelts; i++) {
        if (ngx_http_throttle_str_eq(zones[i]->shm.name, *name)) {
            return (ngx_http_throttle_zone_t *) zones[i]->data;
        }
    }

    return NULL;
}

/* A caller's value quoted in a refusal, cut at NGX_HTTP_THROTTLE_API_QUOTE
 * bytes: `what "value" why`. */
ngx_int_t
ngx_http_throttle_api_quote(ngx_http_throttle_api_call_t *call,
                            const char *what, const ngx_str_t *value,
                            const char *why) noexcept
{
    return ngx_http_throttle_api_refuse(
        call, "%s \"%*s\" %s", what,
        ngx_min(value->len, NGX_HTTP_THROTTLE_API_QUOTE), value->data, why);
}

/*
 * A settle check: neither "cost" nor "delay" (a settle charges what was
 * used, never a reservation, and never waits), and a reservation only as
 * a decision's answer wrote it, read here so that a bad one is refused
 * before anything is settled.
 */
static ngx_int_t
ngx_http_throttle_api_add_settle(ngx_http_throttle_api_call_t        *call,
                                 const ngx_http_throttle_api_asked_t *asked,
                                 ngx_uint_t i) noexcept
{
    ngx_http_throttle_api_settle_t *settle = &call->settles_asked[i];

    if (asked->cost >= 0 || asked->delay_units != throttle::kNoDelay) {
        return ngx_http_throttle_api_refuse(
            call,
            "\"settle\" cannot go with \"%s\": a settle charges the "
            "units used, at once",
            asked->cost >= 0 ? "cost" : "delay");
    }

    if (asked->reservation) {
        auto parsed = throttle::parse_reservation(
            ngx_http_throttle_sv(*asked->reservation));

        if (!parsed) {
            return ngx_http_throttle_api_quote(
                call, "reservation", asked->reservation, parsed.error);
        }

        settle->reserved = true;
        settle->reservation = *parsed.value;
    }

    settle->call = call;
    settle->settled_units = asked->settle_units;

    return NGX_OK;
}

/* A key: given, 1 to NGX_HTTP_THROTTLE_API_MAX_KEY bytes. */
static ngx_int_t
ngx_http_throttle_api_check_key(ngx_http_throttle_api_call_t *call,
                                const ngx_str_t              *key) noexcept
{
    if (key == NULL) {
        return ngx_http_throttle_api_refuse(call, "missing \"key\"");
    }

    if (key->len == 0) {
        return ngx_http_throttle_api_refuse(call, "\"key\" is empty");
    }

    if (key->len > NGX_HTTP_THROTTLE_API_MAX_KEY) {
        return ngx_http_throttle_api_refuse(call,
                                            "\"key\" is longer than %d bytes",
                                            NGX_HTTP_THROTTLE_API_MAX_KEY);
    }

    return NGX_OK;
}

/* The zone a check names, if the endpoint serves it and the call may ask
 * it (NGX_OK, *zone set); the call refused otherwise. */
static ngx_int_t
ngx_http_throttle_api_check_zone(ngx_http_throttle_api_call_t        *call,
                                 const ngx_http_throttle_api_asked_t *asked,
                                 ngx_http_throttle_zone_t **zone) noexcept
{
    ngx_int_t  rc;
    ngx_uint_t i;

    if (asked->zone == NULL) {
        return ngx_http_throttle_api_refuse(call, "missing \"zone\"");
    }

    *zone = ngx_http_throttle_api_zone(call->tlcf, asked->zone);

    if (*zone == NULL) {
        return ngx_http_throttle_api_refuse(
            call, "unknown zone \"%*s\": not one of this endpoint's zones=",
            ngx_min(asked->zone->len, NGX_HTTP_THROTTLE_API_QUOTE),
            asked->zone->data);
    }

    if (call->resets) {
        rc = ngx_http_throttle_api_reset_asked(call, asked, *zone);
        if (rc != NGX_OK) {
            return rc;
        }

    } else if ((*zone)->policy.holds_places()) {
        /* a place is held by a request until it ends: a call ends with
         * its answer (docs/concurrent.md) */
        return ngx_http_throttle_api_refuse(
            call,
            "zone \"%V\" is a concurrent= zone: its places are held by "
            "requests in flight through nginx, which a call cannot hold open",
            &(*zone)->name);
    }

    for (i = 0; i < call->nchecks; i++) {
        if (call->checks[i].zone == *zone) {
            return ngx_http_throttle_api_refuse(
                call, "zone \"%V\" is asked twice", &(*zone)->name);
        }
    }

    return NGX_OK;
}

/* A check as the caller gave it. The readers give at most
 * NGX_HTTP_THROTTLE_API_MAX_CHECKS. */
ngx_int_t
ngx_http_throttle_api_add(ngx_http_throttle_api_call_t        *call,
                          const ngx_http_throttle_api_asked_t *asked) noexcept
{
    ngx_int_t                  rc;
    const char                *refusal;
    throttle::Message          why;
    ngx_http_throttle_zone_t  *zone = NULL;
    ngx_http_throttle_given_t *check;
    const ngx_str_t           *key = asked->key;
    bool                       settles = asked->settle_units >= 0;

    rc = ngx_http_throttle_api_check_zone(call, asked, &zone);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_throttle_api_check_key(call, key);
    if (rc != NGX_OK) {
        return rc;
    }

    /* a settle is never rejected, a decision may be: one answer cannot
     * say both */
    if (call->nchecks > 0 && call->settles != settles) {
        return ngx_http_throttle_api_refuse(
            call,
            "a call decides or settles: \"settle\" must be in every "
            "check or in none");
    }

    if (settles) {
        rc = ngx_http_throttle_api_add_settle(call, asked, call->nchecks);
        if (rc != NGX_OK) {
            return rc;
        }

    } else if (asked->reservation) {
        return ngx_http_throttle_api_refuse(
            call, "\"reservation\" goes with \"settle\"");

    } else if (asked->delay_units != throttle::kNoDelay) {
        refusal = throttle::delay_refusal(zone->policy, why);

        if (refusal) {
            return ngx_http_throttle_api_refuse(
                call, "\"delay\": zone \"%V\" %s", &zone->name, refusal);
        }
    }

    call->settles = settles;
    check = &call->checks[call->nchecks++];
    check->zone = zone;
    check->key = *key;
    check->cost = asked->cost >= 0 ? asked->cost : 1;
    check->delay_units = asked->delay_units;

    return NGX_OK;
}

/* A query string's value, URL-decoded as forms encode it ('+' is a
 * space); NGX_DECLINED for a '%' not followed by two hex digits. */
ngx_int_t
ngx_http_throttle_api_unescape(ngx_pool_t *pool, const ngx_str_t *raw,
                               ngx_str_t *value) noexcept
{
    u_char   *s, *d, *end = raw->data + raw->len;
    ngx_int_t byte;

    d = (u_char *) ngx_pnalloc(pool, raw->len + 1);
    if (d == NULL) {
        return NGX_ERROR;
    }

    value->data = d;

    for (s = raw->data; s < end; s++) {
        if (*s == '+') {
            *d++ = ' ';

        } else if (*s != '%') {
            *d++ = *s;

        } else {
            byte = end - s >= 3 ? ngx_hextoi(s + 1, 2) : NGX_ERROR;
            if (byte == NGX_ERROR) {
                return NGX_DECLINED;
            }

            *d++ = (u_char) byte;
            s += 2;
        }
    }

    value->len = d - value->data;
    return NGX_OK;
}

/* One "name=value" of the query string into values[] by its name. */
static ngx_int_t
ngx_http_throttle_api_arg(ngx_http_throttle_api_call_t *call, u_char *start,
                          u_char *end, ngx_str_t *values) noexcept
{
    u_char    *eq = ngx_strlchr(start, end, '=');
    ngx_int_t  rc;
    ngx_str_t  name, raw;
    ngx_uint_t i;

    name.data = start;
    name.len = (eq ? eq : end) - start;
    raw.data = eq ? eq + 1 : end;
    raw.len = end - raw.data;

    i = ngx_http_throttle_api_field(&name);

    if (i == NGX_HTTP_THROTTLE_API_NFIELDS) {
        return ngx_http_throttle_api_refuse(
            call, "unknown parameter \"%*s\"",
            ngx_min(name.len, NGX_HTTP_THROTTLE_API_QUOTE), name.data);
    }

    if (values[i].data) {
        return ngx_http_throttle_api_refuse(
            call, "parameter \"%V\" is repeated", &name);
    }

    rc = ngx_http_throttle_api_unescape(call->request->pool, &raw, &values[i]);

    if (rc == NGX_DECLINED) {
        return ngx_http_throttle_api_refuse(
            call, "parameter \"%V\" has a '%%' not followed by two hex digits",
            &name);
    }

    return rc;
}

/* A query string's count: "unset" when not given, else an integer from 0
 * to max. */
static ngx_int_t
ngx_http_throttle_api_arg_count(ngx_http_throttle_api_call_t *call,
                                const char *name, const ngx_str_t *value,
                                int64_t max, int64_t unset,
                                int64_t *count) noexcept
{
    u_char why[48];

    if (value->data == NULL) {
        *count = unset;
        return NGX_OK;
    }

    auto parsed = throttle::parse_count(ngx_http_throttle_sv(*value), max);

    if (!parsed) {
        *ngx_snprintf(why, sizeof(why) - 1, "is not an integer from 0 to %L",
                      max) = '\0';
        return ngx_http_throttle_api_quote(call, name, value,
                                           (const char *) why);
    }

    *count = *parsed.value;
    return NGX_OK;
}

/* A GET's (or HEAD's) one check: zone=, key=, and cost= (default 1) and
 * delay=, or settle= and reservation=. */
ngx_int_t
ngx_http_throttle_api_read_args(ngx_http_throttle_api_call_t *call) noexcept
{
    u_char    *p, *end, *amp;
    ngx_int_t  rc;
    ngx_str_t  values[NGX_HTTP_THROTTLE_API_NFIELDS];
    ngx_str_t *zone = &values[NGX_HTTP_THROTTLE_API_ZONE];
    ngx_str_t *key = &values[NGX_HTTP_THROTTLE_API_KEY];
    ngx_str_t *cost = &values[NGX_HTTP_THROTTLE_API_COST];
    ngx_str_t *delay = &values[NGX_HTTP_THROTTLE_API_DELAY];
    ngx_str_t *settle = &values[NGX_HTTP_THROTTLE_API_SETTLE];
    ngx_str_t *reservation = &values[NGX_HTTP_THROTTLE_API_RESERVATION];
    ngx_str_t *args = &call->request->args;
    ngx_http_throttle_api_asked_t asked;

    ngx_memzero(values, sizeof(values));

    p = args->data;
    end = args->data + args->len;

    for (/* void */; p < end; p = amp + 1) {
        amp = ngx_strlchr(p, end, '&');
        if (amp == NULL) {
            amp = end;
        }

        if (amp > p) {
            rc = ngx_http_throttle_api_arg(call, p, amp, values);
            if (rc != NGX_OK) {
                return rc;
            }
        }
    }

    asked.zone = zone->data ? zone : NULL;
    asked.key = key->data ? key : NULL;
    asked.reservation = reservation->data ? reservation : NULL;

    rc = ngx_http_throttle_api_arg_count(call, "cost", cost, throttle::kMaxCost,
                                         -1, &asked.cost);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_throttle_api_arg_count(
        call, "delay", delay, throttle::kMaxDelay, throttle::kNoDelay,
        &asked.delay_units);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_throttle_api_arg_count(
        call, "settle", settle, throttle::kMaxCost, -1, &asked.settle_units);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_throttle_api_add(call, &asked);
}

/* Whether the request says it has a body. */
bool
ngx_http_throttle_api_has_body(ngx_http_request_t *r) noexcept
{
    return r->headers_in.content_length_n > 0 || r->headers_in.chunked;
}

/*
 * A reset's one key, before ngx_http_throttle_api_add() checks it as any
 * check's: from the query string or a body, not both (which would say
 * the key?), and "zone" and "key" only, since a parameter that means
 * nothing to a reset is a mistake the caller should hear of.
 */
ngx_int_t
ngx_http_throttle_api_reset_asked(ngx_http_throttle_api_call_t        *call,
                                  const ngx_http_throttle_api_asked_t *asked,
                                  const ngx_http_throttle_zone_t *zone) noexcept
{
    const char       *refusal;
    throttle::Message why;

    const char *other = asked->cost >= 0           ? "cost"
        : asked->delay_units != throttle::kNoDelay ? "delay"
        : asked->settle_units >= 0                 ? "settle"
        : asked->reservation                       ? "reservation"
                                                   : NULL;

    if (call->request->args.len
        && ngx_http_throttle_api_has_body(call->request)) {
        return ngx_http_throttle_api_refuse(
            call,
            "a reset takes \"zone\" and \"key\" from the query string or "
            "from a JSON body, not both");
    }

    if (call->nchecks > 0) {
        return ngx_http_throttle_api_refuse(call, "a reset resets one key");
    }

    if (other) {
        return ngx_http_throttle_api_refuse(
            call, "a reset takes \"zone\" and \"key\" only, not \"%s\"", other);
    }

    refusal = throttle::reset_refusal(zone->policy, why);
    if (refusal) {
        return ngx_http_throttle_api_refuse(call, "zone \"%V\" %s", &zone->name,
                                            refusal);
    }

    return NGX_OK;
}
