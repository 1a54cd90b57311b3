/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_zone $key zone=name:size rate=30r/m|$var [burst=N|$var]
 *     [algorithm=gcra|fixed_window|sliding_window|sliding_log [log_max=N]]
 *     [redis=NAME [sync=strict|async] [sync_interval=100ms]];
 * throttle_zone $key zone=name:size concurrent=N [lease=60s] [redis=NAME];
 *     either with [top_decay=60s]: how fast throttle_api's top= counts halve
 *
 * Each parameter has a helper; the rules that depend on the algorithm
 * (what it accepts, its limits) are the core's, in throttle::make_policy().
 * A rate= or burst= with variables is read per request
 * (ngx_http_throttle_plans.cpp); one without is parsed here, once.
 */

#include "ngx_http_throttle_zone.h"
#include "ngx_http_throttle_params.h"

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#include <new>

/* Nothing smaller holds the slab pool's own pages and a useful tree. */
#define NGX_HTTP_THROTTLE_MIN_ZONE_PAGES 8

/* What an async zone does unless told otherwise, ms. */
#define NGX_HTTP_THROTTLE_SYNC_INTERVAL 100

/* throttle_zone's parameters, while they are read. */
typedef struct {
    ngx_http_throttle_value_t *key;
    throttle::ZoneParams       params;  /* rate=, burst=, algorithm= */
    ngx_str_t                  name;    /* of zone= */
    ssize_t                    size;    /* of zone= */
    ngx_int_t                  log_max; /* NGX_CONF_UNSET: not given */
    ngx_str_t                  redis_name;
    ngx_uint_t                 mode; /* sync=, a throttle::Mode */
    ngx_msec_t                 sync_interval;
    ngx_int_t                  concurrent; /* NGX_CONF_UNSET: not given */
    ngx_msec_t                 lease;
    /* rate= and burst= with variables (NULL: a constant, in params) */
    ngx_http_throttle_value_t *rate;
    ngx_http_throttle_value_t *burst;
    ngx_msec_t                 top_decay;
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
template <typename T, typename To>
static char *
ngx_http_throttle_zone_take(ngx_conf_t *cf, const char *what, ngx_str_t *arg,
                            const throttle::Parsed<T> &parsed, To *to) noexcept
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

/* A rate= or burst= with variables is compiled into *cv, to be read per
 * request; without, *cv stays NULL and the value is parsed now. */
static char *
ngx_http_throttle_zone_variable(ngx_conf_t *cf, ngx_str_t *v,
                                ngx_http_throttle_value_t **cv) noexcept
{
    *cv = NULL;

    if (ngx_http_script_variables_count(v) == 0) {
        return NGX_CONF_OK;
    }

    *cv = ngx_http_throttle_compile_value(cf, v);

    return *cv ? NGX_CONF_OK : (char *) NGX_CONF_ERROR;
}

static char *
ngx_http_throttle_zone_rate(ngx_conf_t                      *cf,
                            const ngx_http_throttle_param_t *param,
                            ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_zone_args_t *za = (ngx_http_throttle_zone_args_t *) conf;

    if (ngx_http_throttle_zone_variable(cf, v, &za->rate) != NGX_CONF_OK) {
        return (char *) NGX_CONF_ERROR;
    }

    if (za->rate) {
        za->params.rate_varies = true;
        return NGX_CONF_OK;
    }

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

    if (ngx_http_throttle_zone_variable(cf, v, &za->burst) != NGX_CONF_OK) {
        return (char *) NGX_CONF_ERROR;
    }

    if (za->burst) {
        za->params.burst_varies = true;
        return NGX_CONF_OK;
    }

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
ngx_http_throttle_zone_redis(ngx_conf_t                      *cf,
                             const ngx_http_throttle_param_t *param,
                             ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    if (v->len == 0) {
        return ngx_http_throttle_invalid(cf, arg, "name a \"throttle_redis\"");
    }

    ((ngx_http_throttle_zone_args_t *) conf)->redis_name = *v;
    return NGX_CONF_OK;
}

static const ngx_http_throttle_param_range_t ngx_http_throttle_log_max_range = {
    1, throttle::kMaxLogMax, "use a number from 1 to 100000"};

static_assert(throttle::kMaxLogMax == 100000, "the message above says it");

static ngx_conf_enum_t ngx_http_throttle_sync_modes[] = {
    {ngx_string("strict"), (ngx_uint_t) throttle::Mode::strict},
    {ngx_string("async"), (ngx_uint_t) throttle::Mode::async},
    {ngx_null_string, 0}};

static const ngx_http_throttle_param_enum_t ngx_http_throttle_sync_names = {
    ngx_http_throttle_sync_modes, "use sync=strict or sync=async"};

static const ngx_http_throttle_param_range_t
    ngx_http_throttle_sync_interval_range = {10, 60000,
                                             "use a time from 10ms to 60s"};

static const ngx_http_throttle_param_range_t ngx_http_throttle_places_range = {
    1, throttle::kMaxPlaces, "use a number from 1 to 1000000"};

static_assert(throttle::kMaxPlaces == 1000000, "the message above says it");

static const ngx_http_throttle_param_range_t ngx_http_throttle_lease_range = {
    throttle::kMinLeaseUs / 1000, 86400000, "use a time from 1s to 1d"};

static_assert(throttle::kMinLeaseUs == 1000000, "the message above says it");

static const ngx_http_throttle_param_range_t ngx_http_throttle_top_decay_range =
    {throttle::kTopMinDecayMs, throttle::kTopMaxDecayMs,
     "use a time from 1s to 1d"};

static_assert(throttle::kTopMinDecayMs == 1000
                  && throttle::kTopMaxDecayMs == 86400000,
              "the message above says it");

static const ngx_http_throttle_param_t ngx_http_throttle_zone_params[] = {
    {"zone=", ngx_http_throttle_zone_size, 0, NULL},
    {"rate=", ngx_http_throttle_zone_rate, 0, NULL},
    {"burst=", ngx_http_throttle_zone_burst, 0, NULL},
    {"algorithm=", ngx_http_throttle_zone_algorithm, 0, NULL},
    {"log_max=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_zone_args_t, log_max),
     &ngx_http_throttle_log_max_range},
    {"redis=", ngx_http_throttle_zone_redis, 0, NULL},
    {"sync=", ngx_http_throttle_param_enum,
     offsetof(ngx_http_throttle_zone_args_t, mode),
     &ngx_http_throttle_sync_names},
    {"sync_interval=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_zone_args_t, sync_interval),
     &ngx_http_throttle_sync_interval_range},
    {"concurrent=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_zone_args_t, concurrent),
     &ngx_http_throttle_places_range},
    {"lease=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_zone_args_t, lease),
     &ngx_http_throttle_lease_range},
    {"top_decay=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_zone_args_t, top_decay),
     &ngx_http_throttle_top_decay_range},
    {NULL, NULL, 0, NULL}};

/* What the parameters must say together: a name and a rate (or
 * concurrent=); sync= only
 * with redis=, sync_interval= only with sync=async. Where the state lives
 * follows: strict unless asked otherwise with redis=, local without. */
static char *
ngx_http_throttle_zone_where(ngx_conf_t                    *cf,
                             ngx_http_throttle_zone_args_t *za) noexcept
{
    if (za->name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" must have \"zone=name:size\" "
                           "parameter");
        return (char *) NGX_CONF_ERROR;
    }

    if (za->mode != NGX_CONF_UNSET_UINT && za->redis_name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync=\" needs "
                           "\"redis=\"",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (za->sync_interval != NGX_CONF_UNSET_MSEC
        && za->mode != (ngx_uint_t) throttle::Mode::async)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync_interval=\" "
                           "needs \"sync=async\"",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (za->concurrent != NGX_CONF_UNSET) {
        za->params.concurrent = za->concurrent;
    }

    if (za->lease != NGX_CONF_UNSET_MSEC) {
        za->params.lease_us = (int64_t) za->lease * 1000;
    }

    if (za->params.rate.count == 0 && !za->params.rate_varies
        && !za->params.concurrent)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\" must have \"rate=\" "
                           "or \"concurrent=\" parameter",
                           &za->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (za->redis_name.len) {
        ngx_conf_init_uint_value(za->mode, (ngx_uint_t) throttle::Mode::strict);
        za->params.mode = (throttle::Mode) za->mode;
    }

    ngx_conf_init_msec_value(za->sync_interval,
                             NGX_HTTP_THROTTLE_SYNC_INTERVAL);

    if (za->params.mode == throttle::Mode::async) {
        za->params.sync_interval_us = (int64_t) za->sync_interval * 1000;
    }

    if (za->log_max != NGX_CONF_UNSET) {
        za->params.log_max = za->log_max;
    }

    return NGX_CONF_OK;
}

/* The zone, with its shared memory added after the checks whose messages
 * say which directive is at fault (ngx_shared_memory_add()'s would not). */
static char *
ngx_http_throttle_zone_add(ngx_conf_t *cf, ngx_http_throttle_zone_args_t *za,
                           const throttle::Policy &policy) noexcept
{
    ngx_shm_zone_t                *shm_zone;
    ngx_http_throttle_zone_t      *zone, *other, **slot;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    other = ngx_http_throttle_find_named<ngx_http_throttle_zone_t>(&tmcf->zones,
                                                                   za->name);
    if (other) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate \"throttle_zone\" \"%V\": it is "
                           "already defined with the \"%V\" key",
                           &za->name, &other->key->cv.value);
        return (char *) NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &za->name, za->size,
                                     &ngx_http_throttle_module);
    if (shm_zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    zone = (ngx_http_throttle_zone_t *) ngx_palloc(
        cf->pool, sizeof(ngx_http_throttle_zone_t));
    slot = (ngx_http_throttle_zone_t **) ngx_array_push(&tmcf->zones);
    if (zone == NULL || slot == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    *slot = new (zone) ngx_http_throttle_zone_t();

    if (policy.varies()) {
        void *cache = ngx_palloc(cf->pool, sizeof(throttle::PlanCache));
        if (cache == NULL) {
            return (char *) NGX_CONF_ERROR;
        }
        /* each worker's own, as the configuration is */
        zone->plans = new (cache) throttle::PlanCache();
    }

    zone->name = shm_zone->shm.name;
    zone->key = za->key;
    zone->policy = policy;
    zone->rate = za->rate;
    zone->burst = za->burst;
    zone->renew_interval = (ngx_msec_t) (policy.renew_interval_us() / 1000);
    zone->top_decay = za->top_decay == NGX_CONF_UNSET_MSEC
        ? (ngx_msec_t) throttle::kTopDefaultDecayMs
        : za->top_decay;
    zone->shm_zone = shm_zone;
    ngx_queue_init(&zone->flight_waiters);
    zone->redis_name = za->redis_name;
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
    ngx_str_t                    *value = (ngx_str_t *) cf->args->elts;
    ngx_http_throttle_zone_args_t za;
    throttle::Message             why;

    za.key = ngx_http_throttle_compile_value(cf, &value[1]);
    if (za.key == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    ngx_str_null(&za.name);
    ngx_str_null(&za.redis_name);
    za.size = 0;
    za.log_max = NGX_CONF_UNSET;
    za.mode = NGX_CONF_UNSET_UINT;
    za.sync_interval = NGX_CONF_UNSET_MSEC;
    za.concurrent = NGX_CONF_UNSET;
    za.lease = NGX_CONF_UNSET_MSEC;
    za.rate = NULL;
    za.burst = NULL;
    za.top_decay = NGX_CONF_UNSET_MSEC;

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

    return ngx_http_throttle_zone_add(cf, &za, *policy.value);
}
