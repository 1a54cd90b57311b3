/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The "name=value" argument walker shared by the directives, and the
 * small parsers their parameters have in common.
 */

#include "ngx_http_throttle_params.h"

#include "throttle/parse.hpp"

char *
ngx_http_throttle_invalid(ngx_conf_t *cf, ngx_str_t *arg,
                          const char *why) noexcept
{
    ngx_str_t *directive = (ngx_str_t *) cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" in \"%V\"%s%s", arg,
                       &directive[0], why ? ": " : "", why ? why : "");
    return (char *) NGX_CONF_ERROR;
}

/* Whether "arg" is the parameter "name": "name=..." for one that takes a
 * value (then "value" is what follows), or exactly "name" for a flag. */
static bool
ngx_http_throttle_param_matches(ngx_str_t *arg, const char *name,
                                ngx_str_t *value) noexcept
{
    size_t len = ngx_strlen(name);

    if (name[len - 1] != '=') {
        ngx_str_null(value);
        return arg->len == len && ngx_strncmp(arg->data, name, len) == 0;
    }

    if (arg->len < len || ngx_strncmp(arg->data, name, len) != 0) {
        return false;
    }

    value->data = arg->data + len;
    value->len = arg->len - len;
    return true;
}

char *
ngx_http_throttle_parse_params(ngx_conf_t *cf, ngx_uint_t first,
                               const ngx_http_throttle_param_t *params,
                               void                            *conf) noexcept
{
    ngx_str_t                       *args, value;
    ngx_uint_t                       i;
    const ngx_http_throttle_param_t *p;

    args = (ngx_str_t *) cf->args->elts;

    for (i = first; i < cf->args->nelts; i++) {

        for (p = params; p->name; p++) {
            if (ngx_http_throttle_param_matches(&args[i], p->name, &value)) {
                break;
            }
        }

        if (p->name == NULL) {
            return ngx_http_throttle_invalid(cf, &args[i], "unknown");
        }

        if (p->set(cf, p, &args[i], &value, conf) != NGX_CONF_OK) {
            return (char *) NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}

char *
ngx_http_throttle_param_str(ngx_conf_t                      *cf,
                            const ngx_http_throttle_param_t *param,
                            ngx_str_t *arg, ngx_str_t *value,
                            void *conf) noexcept
{
    *(ngx_str_t *) ((char *) conf + param->offset) = *value;
    return NGX_CONF_OK;
}

char *
ngx_http_throttle_param_flag(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *value,
                             void *conf) noexcept
{
    *(ngx_flag_t *) ((char *) conf + param->offset) = 1;
    return NGX_CONF_OK;
}

char *
ngx_http_throttle_param_msec(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *value,
                             void *conf) noexcept
{
    static const ngx_http_throttle_param_range_t any = {
        1, NGX_MAX_INT32_VALUE, "use a time such as 50ms or 1s"};

    const ngx_http_throttle_param_range_t *range = param->post
        ? (const ngx_http_throttle_param_range_t *) param->post
        : &any;
    ngx_int_t                              ms = ngx_parse_time(value, 0);

    if (ms == NGX_ERROR || ms < range->min || ms > range->max) {
        return ngx_http_throttle_invalid(cf, arg, range->why);
    }

    *(ngx_msec_t *) ((char *) conf + param->offset) = (ngx_msec_t) ms;
    return NGX_CONF_OK;
}

char *
ngx_http_throttle_param_number(ngx_conf_t                      *cf,
                               const ngx_http_throttle_param_t *param,
                               ngx_str_t *arg, ngx_str_t *value,
                               void *conf) noexcept
{
    const ngx_http_throttle_param_range_t *range =
        (const ngx_http_throttle_param_range_t *) param->post;
    auto n = throttle::parse_count(ngx_http_throttle_sv(*value), range->max);

    if (!n || *n.value < range->min) {
        return ngx_http_throttle_invalid(cf, arg, range->why);
    }

    *(ngx_int_t *) ((char *) conf + param->offset) = (ngx_int_t) *n.value;
    return NGX_CONF_OK;
}

static ngx_conf_enum_t ngx_http_throttle_on_off[] = {{ngx_string("on"), 1},
                                                     {ngx_string("off"), 0},
                                                     {ngx_null_string, 0}};

const ngx_http_throttle_param_enum_t ngx_http_throttle_param_on_off = {
    ngx_http_throttle_on_off, "use on or off"};

char *
ngx_http_throttle_param_enum(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *value,
                             void *conf) noexcept
{
    const ngx_http_throttle_param_enum_t *names =
        (const ngx_http_throttle_param_enum_t *) param->post;

    for (ngx_conf_enum_t *e = names->values; e->name.len; e++) {
        if (ngx_http_throttle_str_eq(e->name, *value)) {
            *(ngx_uint_t *) ((char *) conf + param->offset) = e->value;
            return NGX_CONF_OK;
        }
    }

    return ngx_http_throttle_invalid(cf, arg, names->why);
}

/* The index of the variable that is the whole text ("$name" or
 * "${name}"), or NGX_ERROR; not a regex capture ("$1"), which has none. */
static ngx_int_t
ngx_http_throttle_sole_variable(ngx_conf_t *cf, const ngx_str_t *text) noexcept
{
    ngx_str_t name;

    if (text->len < 2 || text->data[0] != '$') {
        return NGX_ERROR;
    }

    name.data = text->data + 1;
    name.len = text->len - 1;

    if (name.data[0] == '{') {
        if (name.len < 3 || name.data[name.len - 1] != '}') {
            return NGX_ERROR;
        }
        name.data++;
        name.len -= 2;
    }

    if (name.data[0] >= '0' && name.data[0] <= '9') {
        return NGX_ERROR;
    }

    for (size_t i = 0; i < name.len; i++) {
        u_char c = name.data[i];

        if (!(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')))
        {
            return NGX_ERROR;
        }
    }

    return ngx_http_get_variable_index(cf, &name);
}

ngx_http_throttle_value_t *
ngx_http_throttle_compile_value(ngx_conf_t *cf, ngx_str_t *text) noexcept
{
    ngx_http_throttle_value_t       *value;
    ngx_http_compile_complex_value_t ccv;

    value = (ngx_http_throttle_value_t *) ngx_palloc(
        cf->pool, sizeof(ngx_http_throttle_value_t));
    if (value == NULL) {
        return NULL;
    }

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = text;
    ccv.complex_value = &value->cv;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NULL;
    }

    value->index = ngx_http_throttle_sole_variable(cf, text);

    return value;
}

ngx_int_t
ngx_http_throttle_value(ngx_http_request_t *r, ngx_http_throttle_value_t *value,
                        ngx_str_t *text) noexcept
{
    ngx_http_variable_value_t *v;

    if (value->index == NGX_ERROR) {
        return ngx_http_complex_value(r, &value->cv, text);
    }

    v = ngx_http_get_flushed_variable(r, value->index);
    if (v == NULL) {
        return NGX_ERROR;
    }

    text->data = v->not_found ? NULL : v->data;
    text->len = v->not_found ? 0 : v->len;

    return NGX_OK;
}
