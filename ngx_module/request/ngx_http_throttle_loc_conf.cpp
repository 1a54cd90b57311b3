/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The location's directives:
 *
 *     throttle zone=name [cost=N|$variable] [phase=preaccess|authorized]
 *              [delay=N] [settle=$variable];
 *                                   (several: all of a phase must pass)
 *     throttle_status 400..599;
 *     throttle_headers on|off|legacy;  throttle_log_level ...;
 *     throttle_on_error allow|deny;    (enums, with their own setter)
 *
 * throttle_dry_run is nginx's stock flag slot.
 */

#include "ngx_http_throttle_request.h"
#include "ngx_http_throttle_params.h"

#include "throttle/parse.hpp"

/* throttle's parameters, while they are read. */
typedef struct {
    ngx_str_t  zone;
    ngx_str_t  cost;
    ngx_uint_t phase;
    ngx_int_t  delay;
    ngx_str_t  settle;
} ngx_http_throttle_line_args_t;

static ngx_conf_enum_t ngx_http_throttle_phase_names[] = {
    {ngx_string("preaccess"), NGX_HTTP_THROTTLE_PREACCESS},
    {ngx_string("authorized"), NGX_HTTP_THROTTLE_AUTHORIZED},
    {ngx_null_string, 0}};

static const ngx_http_throttle_param_enum_t ngx_http_throttle_phases = {
    ngx_http_throttle_phase_names,
    "use phase=preaccess (before access checks, the default) or "
    "phase=authorized (once they let the request in)"};

/* delay=: units that may be ahead of a request that goes on at once. Only
 * some algorithms can delay: the zone, perhaps defined further on, is
 * checked once every zone is (ngx_http_throttle_check_refs()). */
static const ngx_http_throttle_param_range_t ngx_http_throttle_delays = {
    0, throttle::kMaxDelay,
    "units ahead of a request that goes on at once, 0 to 1000000000"};

static const ngx_http_throttle_param_t ngx_http_throttle_line_params[] = {
    {"zone=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_line_args_t, zone), NULL},
    {"cost=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_line_args_t, cost), NULL},
    {"phase=", ngx_http_throttle_param_enum,
     offsetof(ngx_http_throttle_line_args_t, phase), &ngx_http_throttle_phases},
    {"delay=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_line_args_t, delay), &ngx_http_throttle_delays},
    {"settle=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_line_args_t, settle), NULL},
    {NULL, NULL, 0, NULL}};

/* cost= is a number, or text with variables evaluated per request. */
static char *
ngx_http_throttle_line_set_cost(ngx_conf_t *cf, ngx_str_t *text,
                                ngx_http_throttle_limit_t *limit) noexcept
{
    limit->cost = NULL;
    limit->cost_value = 1;

    if (text->data == NULL) {
        return NGX_CONF_OK;
    }

    if (ngx_http_script_variables_count(text) == 0) {
        auto parsed = throttle::parse_count(ngx_http_throttle_sv(*text),
                                            throttle::kMaxCost);
        if (!parsed) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid cost \"%V\" in \"throttle\": it %s",
                               text, parsed.error);
            return (char *) NGX_CONF_ERROR;
        }

        limit->cost_value = *parsed.value;
        return NGX_CONF_OK;
    }

    limit->cost = ngx_http_throttle_compile_value(cf, text);

    return limit->cost ? NGX_CONF_OK : (char *) NGX_CONF_ERROR;
}

/* settle=: evaluated when the request ends (ngx_http_throttle_settle.cpp);
 * every zone can settle. */
static char *
ngx_http_throttle_line_set_settle(ngx_conf_t *cf, ngx_str_t *text,
                                  ngx_http_throttle_limit_t *limit) noexcept
{
    limit->settle = NULL;

    if (text->data == NULL) {
        return NGX_CONF_OK;
    }

    if (text->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"settle=\" in \"throttle\": "
                           "it needs the units a request used, such as "
                           "settle=$upstream_http_x_tokens_used");
        return (char *) NGX_CONF_ERROR;
    }

    limit->settle = ngx_http_throttle_compile_value(cf, text);

    return limit->settle ? NGX_CONF_OK : (char *) NGX_CONF_ERROR;
}

/* Keeps the lines sorted by zone name: a request locks its zones in this
 * order, the same in every worker and every location. */
static void
ngx_http_throttle_line_sort(ngx_array_t *lines) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_limit_t *limits =
        (ngx_http_throttle_limit_t *) lines->elts;

    for (i = lines->nelts - 1; i > 0; i--) {
        ngx_str_t *a = &limits[i - 1].shm_zone->shm.name;
        ngx_str_t *b = &limits[i].shm_zone->shm.name;

        if (ngx_memn2cmp(a->data, b->data, a->len, b->len) <= 0) {
            break;
        }

        ngx_http_throttle_limit_t tmp = limits[i - 1];
        limits[i - 1] = limits[i];
        limits[i] = tmp;
    }
}

/* One zone may be named once per block, whatever the phase: a request
 * would otherwise be charged twice. */
static char *
ngx_http_throttle_line_unique(ngx_conf_t                   *cf,
                              ngx_http_throttle_loc_conf_t *tlcf,
                              ngx_shm_zone_t               *shm_zone,
                              ngx_str_t                    *name) noexcept
{
    ngx_uint_t                 i, p;
    ngx_http_throttle_limit_t *limits;

    for (p = 0; p < NGX_HTTP_THROTTLE_NPHASES; p++) {
        if (tlcf->limits[p] == NULL) {
            continue;
        }

        limits = (ngx_http_throttle_limit_t *) tlcf->limits[p]->elts;

        for (i = 0; i < tlcf->limits[p]->nelts; i++) {
            if (limits[i].shm_zone == shm_zone) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "duplicate \"throttle\" for zone \"%V\" "
                                   "in the same block",
                                   name);
                return (char *) NGX_CONF_ERROR;
            }
        }
    }

    return NGX_CONF_OK;
}

/* Remembers where "directive" named the zone, to report one never
 * defined, or one that cannot take the line's delay=, cost= or settle=
 * (the caller sets them); NULL if out of memory. */
ngx_http_throttle_zone_ref_t *
ngx_http_throttle_zone_ref(ngx_conf_t *cf, ngx_shm_zone_t *shm_zone,
                           const char *directive) noexcept
{
    ngx_http_throttle_zone_ref_t  *ref;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    ref = (ngx_http_throttle_zone_ref_t *) ngx_array_push(&tmcf->zone_refs);
    if (ref == NULL) {
        return NULL;
    }

    ngx_memzero(ref, sizeof(ngx_http_throttle_zone_ref_t));
    ref->shm_zone = shm_zone;
    ref->delay_units = throttle::kNoDelay;
    ref->directive = directive;
    ref->file = cf->conf_file->file.name;
    ref->line = cf->conf_file->line;

    return ref;
}

/* The phase handlers the line needs: the authorized phase's, settle='s
 * in the log phase (installed only when some line needs them). */
static void
ngx_http_throttle_line_handlers(
    ngx_conf_t *cf, const ngx_http_throttle_line_args_t *la) noexcept
{
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    if (la->phase == NGX_HTTP_THROTTLE_AUTHORIZED) {
        tmcf->authorized = 1;
    }

    if (la->settle.data) {
        tmcf->settle = 1;
    }
}

/* A new line of a phase's lines, made on first use; NULL if out of
 * memory. */
static ngx_http_throttle_limit_t *
ngx_http_throttle_line_add(ngx_conf_t *cf, ngx_array_t **lines) noexcept
{
    if (*lines == NULL) {
        *lines =
            ngx_array_create(cf->pool, 1, sizeof(ngx_http_throttle_limit_t));
        if (*lines == NULL) {
            return NULL;
        }
    }

    return (ngx_http_throttle_limit_t *) ngx_array_push(*lines);
}

char *
ngx_http_throttle_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                            void *conf) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = (ngx_http_throttle_loc_conf_t *) conf;
    ngx_array_t                 **lines;
    ngx_shm_zone_t               *shm_zone;
    ngx_http_throttle_limit_t    *limit;
    ngx_http_throttle_zone_ref_t *ref;
    ngx_http_throttle_line_args_t la;

    ngx_str_null(&la.zone);
    ngx_str_null(&la.cost);
    ngx_str_null(&la.settle);
    la.phase = NGX_HTTP_THROTTLE_PREACCESS;
    la.delay = NGX_CONF_UNSET;

    if (ngx_http_throttle_parse_params(cf, 1, ngx_http_throttle_line_params,
                                       &la)
        != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    if (la.zone.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle\" must have \"zone=name\" parameter");
        return (char *) NGX_CONF_ERROR;
    }

    shm_zone =
        ngx_shared_memory_add(cf, &la.zone, 0, &ngx_http_throttle_module);
    if (shm_zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    if (ngx_http_throttle_line_unique(cf, tlcf, shm_zone, &la.zone)
        != NGX_CONF_OK) {
        return (char *) NGX_CONF_ERROR;
    }

    ngx_http_throttle_line_handlers(cf, &la);

    lines = &tlcf->limits[la.phase];
    limit = ngx_http_throttle_line_add(cf, lines);
    if (limit == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    limit->shm_zone = shm_zone;
    limit->delay_units =
        la.delay == NGX_CONF_UNSET ? throttle::kNoDelay : la.delay;

    if (ngx_http_throttle_line_set_cost(cf, &la.cost, limit) != NGX_CONF_OK
        || ngx_http_throttle_line_set_settle(cf, &la.settle, limit)
            != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    ngx_http_throttle_line_sort(*lines);

    ref = ngx_http_throttle_zone_ref(cf, shm_zone, "throttle");
    if (ref == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    ref->delay_units = limit->delay_units;
    ref->cost = la.cost;
    ref->settle = la.settle;

    return NGX_CONF_OK;
}

/* ngx_conf_set_enum_slot, with a message that names the directive and the
 * accepted values */
char *
ngx_http_throttle_set_enum(ngx_conf_t *cf, ngx_command_t *cmd,
                           void *conf) noexcept
{
    ngx_uint_t      *field = (ngx_uint_t *) ((char *) conf + cmd->offset);
    ngx_str_t       *value = (ngx_str_t *) cf->args->elts;
    ngx_conf_enum_t *e = (ngx_conf_enum_t *) cmd->post;
    u_char           names[128], *p = names, *last = names + sizeof(names);
    ngx_uint_t       i;

    if (*field != NGX_CONF_UNSET_UINT) {
        return (char *) "is duplicate";
    }

    for (i = 0; e[i].name.len; i++) {
        if (e[i].name.len == value[1].len
            && ngx_strcasecmp(e[i].name.data, value[1].data) == 0)
        {
            *field = e[i].value;
            return NGX_CONF_OK;
        }

        p = ngx_slprintf(p, last, "%s\"%V\"", i ? ", " : "", &e[i].name);
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid value \"%V\" in \"%V\" directive, it must be "
                       "one of %*s",
                       &value[1], &cmd->name, p - names, names);
    return (char *) NGX_CONF_ERROR;
}

char *
ngx_http_throttle_set_status(ngx_conf_t *cf, ngx_command_t *cmd,
                             void *conf) noexcept
{
    ngx_uint_t *field = (ngx_uint_t *) ((char *) conf + cmd->offset);
    ngx_str_t  *value = (ngx_str_t *) cf->args->elts;
    ngx_int_t   status;

    if (*field != NGX_CONF_UNSET_UINT) {
        return (char *) "is duplicate";
    }

    status = ngx_atoi(value[1].data, value[1].len);

    if (status < 400 || status > 599) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" in \"%V\" directive, it must "
                           "be a status code between 400 and 599",
                           &value[1], &cmd->name);
        return (char *) NGX_CONF_ERROR;
    }

    *field = (ngx_uint_t) status;
    return NGX_CONF_OK;
}
