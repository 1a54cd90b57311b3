/*
 * throttle_zone $key zone=name:size rate=30r/m [burst=N]
 *     [algorithm=gcra|fixed_window|sliding_window|sliding_log [log_max=N]]
 *     [redis=NAME [sync=strict|async] [sync_interval=100ms]];
 *
 * Each parameter has a helper; the rules that depend on the algorithm
 * (what it accepts, its limits) are the core's, in throttle::make_policy().
 */

#include "ngx_http_throttle_module.h"
#include "ngx_http_throttle_params.h"

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#include <new>
#include <optional>

/* Nothing smaller holds the slab pool's own pages and a useful tree. */
#define NGX_HTTP_THROTTLE_MIN_ZONE_PAGES 8

/* What an async zone does unless told otherwise, ms. */
#define NGX_HTTP_THROTTLE_SYNC_INTERVAL 100

/* throttle_zone's parameters, while they are read. */
typedef struct {
    ngx_http_throttle_zone_t     *zone;
    throttle::ZoneParams          params;
    std::optional<throttle::Mode> mode; /* sync= */
    ngx_str_t                     name; /* of zone= */
    ssize_t                       size;
} ngx_http_throttle_zone_args_t;

static char *
ngx_http_throttle_zone_size(ngx_conf_t                      *cf,
                            const ngx_http_throttle_param_t *param,
                            ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;
    u_char                        *colon;
    ngx_str_t                      size;

    colon = (u_char *) ngx_strlchr(v->data, v->data + v->len, ':');
    za->name.data = v->data;
    za->name.len = colon ? (size_t) (colon - v->data) : v->len;

    if (colon == NULL
        || !throttle::valid_zone_name(ngx_http_throttle_sv(za->name))) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\" in \"throttle_zone\": use "
                           "zone=name:size, with a name of letters, digits, "
                           "\"_\", \"-\" or \".\"",
                           v);
        return (char *) NGX_CONF_ERROR;
    }

    size.data = colon + 1;
    size.len = v->data + v->len - size.data;
    za->size = ngx_parse_size(&size);

    if (za->size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\" in \"throttle_zone\"", v);
        return (char *) NGX_CONF_ERROR;
    }

    if (za->size < (ssize_t) (NGX_HTTP_THROTTLE_MIN_ZONE_PAGES * ngx_pagesize))
    {
        ngx_conf_log_error(
            NGX_LOG_EMERG, cf, 0,
            "zone \"%V\" in \"throttle_zone\" is too small, it must be at "
            "least %uzk",
            v, NGX_HTTP_THROTTLE_MIN_ZONE_PAGES * ngx_pagesize / 1024);
        return (char *) NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}

/* Keeps what rate=, burst= or algorithm= parsed, or says why not: "invalid
 * rate "rate=x" in "throttle_zone": it <why>". */
template <typename T>
static char *
ngx_http_throttle_zone_take(ngx_conf_t *cf, const char *what, ngx_str_t *arg,
                            const throttle::Parsed<T> &parsed, T *to) noexcept
{
    if (!parsed) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid %s \"%V\" in \"throttle_zone\": it %s",
                           what, arg, parsed.error);
        return (char *) NGX_CONF_ERROR;
    }

    *to = *parsed.value;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_zone_rate(ngx_conf_t                      *cf,
                            const ngx_http_throttle_param_t *param,
                            ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;

    return ngx_http_throttle_zone_take(
        cf, "rate", arg, throttle::parse_rate(ngx_http_throttle_sv(*v)),
        &za->params.rate);
}

static char *
ngx_http_throttle_zone_burst(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;

    return ngx_http_throttle_zone_take(
        cf, "burst", arg,
        throttle::parse_count(ngx_http_throttle_sv(*v), throttle::kMaxBurst),
        &za->params.burst);
}

static char *
ngx_http_throttle_zone_algorithm(ngx_conf_t                      *cf,
                                 const ngx_http_throttle_param_t *param,
                                 ngx_str_t *arg, ngx_str_t *v,
                                 void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;
    throttle::Message              why;

    return ngx_http_throttle_zone_take(
        cf, "algorithm", arg,
        throttle::find_algorithm(ngx_http_throttle_sv(*v), why),
        &za->params.algorithm);
}

static char *
ngx_http_throttle_zone_log_max(ngx_conf_t                      *cf,
                               const ngx_http_throttle_param_t *param,
                               ngx_str_t *arg, ngx_str_t *v,
                               void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;
    u_char                         why[64];
    auto                           parsed =
        throttle::parse_count(ngx_http_throttle_sv(*v), throttle::kMaxLogMax);

    if (!parsed || *parsed.value == 0) {
        ngx_sprintf(why, "use a number from 1 to %L%Z", throttle::kMaxLogMax);
        return ngx_http_throttle_invalid(cf, arg, (const char *) why);
    }

    za->params.log_max = *parsed.value;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_zone_redis(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;

    if (v->len == 0) {
        return ngx_http_throttle_invalid(cf, arg, "name a \"throttle_redis\"");
    }

    za->zone->redis_name = *v;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_zone_sync(ngx_conf_t                      *cf,
                            const ngx_http_throttle_param_t *param,
                            ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;
    static ngx_str_t               strict = ngx_string("strict");
    static ngx_str_t               async = ngx_string("async");

    if (ngx_http_throttle_str_eq(*v, strict)) {
        za->mode = throttle::Mode::strict;

    } else if (ngx_http_throttle_str_eq(*v, async)) {
        za->mode = throttle::Mode::async;

    } else {
        return ngx_http_throttle_invalid(cf, arg,
                                         "use sync=strict or sync=async");
    }

    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_zone_sync_interval(ngx_conf_t                      *cf,
                                     const ngx_http_throttle_param_t *param,
                                     ngx_str_t *arg, ngx_str_t *v,
                                     void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;
    ngx_int_t                      ms = ngx_parse_time(v, 0);

    if (ms == NGX_ERROR || ms < 10 || ms > 60000) {
        return ngx_http_throttle_invalid(cf, arg,
                                         "use a time from 10ms to 60s");
    }

    za->zone->sync_interval = (ngx_msec_t) ms;
    return NGX_CONF_OK;
}

static const ngx_http_throttle_param_t ngx_http_throttle_zone_params[] = {
    {"zone=", ngx_http_throttle_zone_size, 0},
    {"rate=", ngx_http_throttle_zone_rate, 0},
    {"burst=", ngx_http_throttle_zone_burst, 0},
    {"algorithm=", ngx_http_throttle_zone_algorithm, 0},
    {"log_max=", ngx_http_throttle_zone_log_max, 0},
    {"redis=", ngx_http_throttle_zone_redis, 0},
    {"sync=", ngx_http_throttle_zone_sync, 0},
    {"sync_interval=", ngx_http_throttle_zone_sync_interval, 0},
    {NULL, NULL, 0}};

/* What the parameters must say together: a name and a rate; sync= only
 * with redis=, sync_interval= only with sync=async. Where the state lives
 * follows: strict unless asked otherwise with redis=, local without. */
static char *
ngx_http_throttle_zone_where(ngx_conf_t                    *cf,
                             ngx_http_throttle_zone_args_t *za) noexcept
{
    ngx_http_throttle_zone_t *zone = za->zone;

    if (za->name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" must have \"zone=name:size\" "
                           "parameter");
        return (char *) NGX_CONF_ERROR;
    }

    if (za->mode && zone->redis_name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync=\" needs "
                           "\"redis=\"",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (zone->sync_interval && za->mode != throttle::Mode::async) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync_interval=\" "
                           "needs \"sync=async\"",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (za->params.rate.count == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\" must have \"rate=\" "
                           "parameter",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (zone->redis_name.len) {
        za->params.mode = za->mode.value_or(throttle::Mode::strict);
    }

    if (za->params.mode == throttle::Mode::async) {
        if (zone->sync_interval == 0) {
            zone->sync_interval = NGX_HTTP_THROTTLE_SYNC_INTERVAL;
        }
        za->params.sync_interval_us = (int64_t) zone->sync_interval * 1000;
    }

    return NGX_CONF_OK;
}

/* Adds the zone's shared memory, after the checks whose messages say
 * which directive is at fault (ngx_shared_memory_add()'s would not). */
static char *
ngx_http_throttle_zone_add(ngx_conf_t                    *cf,
                           ngx_http_throttle_zone_args_t *za) noexcept
{
    ngx_shm_zone_t                *shm_zone;
    ngx_http_throttle_zone_t      *zone = za->zone, *other, **slot;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    other = ngx_http_throttle_find_named<ngx_http_throttle_zone_t>(&tmcf->zones,
                                                                   za->name);
    if (other) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate \"throttle_zone\" \"%V\": it is "
                           "already defined with the \"%V\" key",
                           &za->name, &other->key.value);
        return (char *) NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &za->name, za->size,
                                     &ngx_http_throttle_module);
    if (shm_zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    slot = (ngx_http_throttle_zone_t **) ngx_array_push(&tmcf->zones);
    if (slot == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    *slot = zone;
    zone->name = shm_zone->shm.name;
    zone->shm_zone = shm_zone;
    zone->file = cf->conf_file->file.name;
    zone->line = cf->conf_file->line;

    shm_zone->init = ngx_http_throttle_init_zone;
    shm_zone->data = zone;

    return NGX_CONF_OK;
}

char *
ngx_http_throttle_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                 void *conf) noexcept
{
    ngx_str_t                       *value = (ngx_str_t *) cf->args->elts;
    ngx_http_throttle_zone_t        *zone;
    ngx_http_throttle_zone_args_t    za;
    ngx_http_compile_complex_value_t ccv;
    throttle::Message                why;

    zone = (ngx_http_throttle_zone_t *) ngx_palloc(
        cf->pool, sizeof(ngx_http_throttle_zone_t));
    if (zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    new (zone) ngx_http_throttle_zone_t();

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = &zone->key;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return (char *) NGX_CONF_ERROR;
    }

    za.zone = zone;
    za.size = 0;
    ngx_str_null(&za.name);

    if (ngx_http_throttle_parse_params(cf, 2, ngx_http_throttle_zone_params,
                                       &za)
            != NGX_CONF_OK
        || ngx_http_throttle_zone_where(cf, &za) != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    auto policy = throttle::make_policy(za.params, why);
    if (!policy) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"throttle_zone\" \"%V\": %s",
                           &za.name, policy.error);
        return (char *) NGX_CONF_ERROR;
    }

    zone->policy = *policy.value;

    return ngx_http_throttle_zone_add(cf, &za);
}
