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
