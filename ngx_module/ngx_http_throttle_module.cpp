/*
 * ngx_http_throttle_module: directives, configuration and registration.
 *
 *     throttle_zone $key zone=name:size rate=30r/m [burst=N]
 *         [algorithm=gcra|fixed_window|sliding_window|sliding_log [log_max=N]];
 *     throttle zone=name [cost=N|$variable];
 *     throttle_status, throttle_headers, throttle_dry_run,
 *     throttle_log_level, throttle_on_error
 */

#include "ngx_http_throttle_module.h"

#include "throttle/headers.hpp"

#include <new>

static char *ngx_http_throttle_zone(ngx_conf_t *cf, ngx_command_t *cmd,
                                    void *conf) noexcept;
static char *ngx_http_throttle(ngx_conf_t *cf, ngx_command_t *cmd,
                               void *conf) noexcept;
static char *ngx_http_throttle_set_enum(ngx_conf_t *cf, ngx_command_t *cmd,
                                        void *conf) noexcept;
static char *ngx_http_throttle_set_status(ngx_conf_t *cf, ngx_command_t *cmd,
                                          void *conf) noexcept;
static void *ngx_http_throttle_create_main_conf(ngx_conf_t *cf) noexcept;
static void *ngx_http_throttle_create_loc_conf(ngx_conf_t *cf) noexcept;
static char *ngx_http_throttle_merge_loc_conf(ngx_conf_t *cf, void *parent,
                                              void *child) noexcept;
static ngx_int_t ngx_http_throttle_init(ngx_conf_t *cf) noexcept;
static char     *ngx_http_throttle_redis(ngx_conf_t *cf, ngx_command_t *cmd,
                                         void *conf) noexcept;
static ngx_int_t ngx_http_throttle_init_process(ngx_cycle_t *cycle) noexcept;
static void      ngx_http_throttle_exit_process(ngx_cycle_t *cycle) noexcept;

/* Nothing smaller holds the slab pool's own pages and a useful tree. */
#define NGX_HTTP_THROTTLE_MIN_ZONE_PAGES 8

static ngx_conf_enum_t ngx_http_throttle_headers_modes[] = {
    {ngx_string("off"), NGX_HTTP_THROTTLE_HEADERS_OFF},
    {ngx_string("on"), NGX_HTTP_THROTTLE_HEADERS_ON},
    {ngx_string("legacy"), NGX_HTTP_THROTTLE_HEADERS_LEGACY},
    {ngx_null_string, 0}};

static ngx_conf_enum_t ngx_http_throttle_log_levels[] = {
    {ngx_string("info"), NGX_LOG_INFO},
    {ngx_string("notice"), NGX_LOG_NOTICE},
    {ngx_string("warn"), NGX_LOG_WARN},
    {ngx_string("error"), NGX_LOG_ERR},
    {ngx_null_string, 0}};

static ngx_conf_enum_t ngx_http_throttle_on_error_modes[] = {
    {ngx_string("allow"), NGX_HTTP_THROTTLE_ON_ERROR_ALLOW},
    {ngx_string("deny"), NGX_HTTP_THROTTLE_ON_ERROR_DENY},
    {ngx_null_string, 0}};

static ngx_command_t ngx_http_throttle_commands[] = {

    {ngx_string("throttle_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
     ngx_http_throttle_zone, 0, 0, NULL},

    {ngx_string("throttle_redis"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
     ngx_http_throttle_redis, 0, 0, NULL},

    {ngx_string("throttle"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE12,
     ngx_http_throttle, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},

    {ngx_string("throttle_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_http_throttle_set_status, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_throttle_loc_conf_t, status), NULL},

    {ngx_string("throttle_headers"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_http_throttle_set_enum, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_throttle_loc_conf_t, headers),
     &ngx_http_throttle_headers_modes},

    {ngx_string("throttle_dry_run"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_throttle_loc_conf_t, dry_run), NULL},

    {ngx_string("throttle_log_level"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_http_throttle_set_enum, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_throttle_loc_conf_t, log_level),
     &ngx_http_throttle_log_levels},

    {ngx_string("throttle_on_error"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1,
     ngx_http_throttle_set_enum, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_throttle_loc_conf_t, on_error),
     &ngx_http_throttle_on_error_modes},

    ngx_null_command};

static ngx_http_module_t ngx_http_throttle_module_ctx = {
    ngx_http_throttle_add_variables, /* preconfiguration */
    ngx_http_throttle_init,          /* postconfiguration */

    ngx_http_throttle_create_main_conf, /* create main configuration */
    NULL,                               /* init main configuration */

    NULL, /* create server configuration */
    NULL, /* merge server configuration */

    ngx_http_throttle_create_loc_conf, /* create location configuration */
    ngx_http_throttle_merge_loc_conf   /* merge location configuration */
};

ngx_module_t ngx_http_throttle_module = {
    NGX_MODULE_V1,
    &ngx_http_throttle_module_ctx,  /* module context */
    ngx_http_throttle_commands,     /* module directives */
    NGX_HTTP_MODULE,                /* module type */
    NULL,                           /* init master */
    NULL,                           /* init module */
    ngx_http_throttle_init_process, /* init process */
    NULL,                           /* init thread */
    NULL,                           /* exit thread */
    ngx_http_throttle_exit_process, /* exit process */
    NULL,                           /* exit master */
    NGX_MODULE_V1_PADDING};

static std::string_view
ngx_http_throttle_sv(const ngx_str_t &s) noexcept
{
    return {(const char *) s.data, s.len};
}

static char *
ngx_http_throttle_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    u_char                          *colon;
    ssize_t                          size;
    ngx_str_t                       *value, v, name, size_text;
    ngx_str_t                        rate_text;
    ngx_uint_t                       i;
    ngx_shm_zone_t                  *shm_zone;
    ngx_http_throttle_zone_t        *zone, **zones, **zonep;
    ngx_http_throttle_main_conf_t   *tmcf;
    ngx_http_compile_complex_value_t ccv;

    throttle::Rate      rate{};
    int64_t             burst = 0;
    throttle::Algorithm algorithm = throttle::Algorithm::gcra;
    ngx_uint_t          sync = NGX_CONF_UNSET_UINT;
    int64_t             log_max = NGX_CONF_UNSET;

    value = (ngx_str_t *) cf->args->elts;

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

    size = 0;
    name.len = 0;
    rate_text.len = 0;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_http_throttle_param(&value[i], "zone=", &v)) {

            colon = (u_char *) ngx_strlchr(v.data, v.data + v.len, ':');
            name.data = v.data;
            name.len = colon ? (size_t) (colon - v.data) : v.len;

            if (colon == NULL
                || !throttle::valid_zone_name(ngx_http_throttle_sv(name))) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone \"%V\" in \"throttle_zone\": "
                                   "use zone=name:size, with a name of "
                                   "letters, digits, \"_\", \"-\" or \".\"",
                                   &v);
                return (char *) NGX_CONF_ERROR;
            }

            size_text.data = colon + 1;
            size_text.len = v.data + v.len - size_text.data;

            size = ngx_parse_size(&size_text);

            if (size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone size \"%V\" in "
                                   "\"throttle_zone\"",
                                   &v);
                return (char *) NGX_CONF_ERROR;
            }

            if (size
                < (ssize_t) (NGX_HTTP_THROTTLE_MIN_ZONE_PAGES * ngx_pagesize)) {
                ngx_conf_log_error(
                    NGX_LOG_EMERG, cf, 0,
                    "zone \"%V\" in \"throttle_zone\" is too "
                    "small, it must be at least %uzk",
                    &v, NGX_HTTP_THROTTLE_MIN_ZONE_PAGES * ngx_pagesize / 1024);
                return (char *) NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_http_throttle_param(&value[i], "rate=", &v)) {
            auto parsed = throttle::parse_rate(ngx_http_throttle_sv(v));
            if (!parsed) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid rate \"%V\" in \"throttle_zone\": "
                                   "it %s",
                                   &value[i], parsed.error);
                return (char *) NGX_CONF_ERROR;
            }

            rate = *parsed.value;
            rate_text = v;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "burst=", &v)) {
            auto parsed = throttle::parse_count(ngx_http_throttle_sv(v),
                                                throttle::kMaxBurst);
            if (!parsed) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid burst \"%V\" in \"throttle_zone\": "
                                   "it %s",
                                   &value[i], parsed.error);
                return (char *) NGX_CONF_ERROR;
            }

            burst = *parsed.value;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "algorithm=", &v)) {
            auto parsed = throttle::parse_algorithm(ngx_http_throttle_sv(v));
            if (!parsed) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid algorithm \"%V\" in "
                                   "\"throttle_zone\": it %s",
                                   &value[i], parsed.error);
                return (char *) NGX_CONF_ERROR;
            }

            algorithm = *parsed.value;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "log_max=", &v)) {
            auto parsed = throttle::parse_count(ngx_http_throttle_sv(v),
                                                throttle::kMaxLogMax);
            if (!parsed || *parsed.value == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\" in "
                                   "\"throttle_zone\": use a number from "
                                   "1 to %L",
                                   &value[i], throttle::kMaxLogMax);
                return (char *) NGX_CONF_ERROR;
            }

            log_max = *parsed.value;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "redis=", &v)) {
            if (v.len == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\" in "
                                   "\"throttle_zone\": name a "
                                   "\"throttle_redis\"",
                                   &value[i]);
                return (char *) NGX_CONF_ERROR;
            }

            zone->redis_name = v;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "sync=", &v)) {
            if (v.len == 6 && ngx_strncmp(v.data, "strict", 6) == 0) {
                sync = NGX_HTTP_THROTTLE_SYNC_STRICT;
                continue;
            }

            if (v.len == 5 && ngx_strncmp(v.data, "async", 5) == 0) {
                sync = NGX_HTTP_THROTTLE_SYNC_ASYNC;
                continue;
            }

            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\" in "
                               "\"throttle_zone\": use sync=strict or "
                               "sync=async",
                               &value[i]);
            return (char *) NGX_CONF_ERROR;
        }

        if (ngx_http_throttle_param(&value[i], "sync_interval=", &v)) {
            ngx_int_t ms = ngx_parse_time(&v, 0);

            if (ms == NGX_ERROR || ms < 10 || ms > 60000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\" in "
                                   "\"throttle_zone\": use a time from "
                                   "10ms to 60s",
                                   &value[i]);
                return (char *) NGX_CONF_ERROR;
            }

            zone->sync_interval = (ngx_msec_t) ms;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in \"throttle_zone\"",
                           &value[i]);
        return (char *) NGX_CONF_ERROR;
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" must have "
                           "\"zone=name:size\" parameter");
        return (char *) NGX_CONF_ERROR;
    }

    if (sync != NGX_CONF_UNSET_UINT && zone->redis_name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync=\" needs "
                           "\"redis=\"",
                           &name);
        return (char *) NGX_CONF_ERROR;
    }

    if (zone->sync_interval && sync != NGX_HTTP_THROTTLE_SYNC_ASYNC) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"sync_interval=\" "
                           "needs \"sync=async\"",
                           &name);
        return (char *) NGX_CONF_ERROR;
    }

    if (zone->redis_name.len) {
        /* strict unless asked otherwise; async syncs every 100ms unless
         * told */
        zone->sync = (sync == NGX_CONF_UNSET_UINT)
            ? NGX_HTTP_THROTTLE_SYNC_STRICT
            : sync;
        if (zone->sync_interval == 0) {
            zone->sync_interval = 100;
        }
    }

    if (rate_text.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\" must have "
                           "\"rate=\" parameter",
                           &name);
        return (char *) NGX_CONF_ERROR;
    }

    if (log_max != NGX_CONF_UNSET
        && algorithm != throttle::Algorithm::sliding_log) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": \"log_max=\" needs "
                           "\"algorithm=sliding_log\"",
                           &name);
        return (char *) NGX_CONF_ERROR;
    }

    if (algorithm == throttle::Algorithm::sliding_log
        && zone->sync == NGX_HTTP_THROTTLE_SYNC_ASYNC)
    {
        /* a log is exact or it is nothing: nodes cannot merge timestamps
         * they did not see without keeping every one of them twice */
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": "
                           "\"algorithm=sliding_log\" cannot \"sync=async\"; "
                           "use sync=strict, or sliding_window",
                           &name);
        return (char *) NGX_CONF_ERROR;
    }

    if (log_max == NGX_CONF_UNSET) {
        log_max = throttle::kDefaultLogMax;
    }

    auto policy = throttle::make_policy(algorithm, rate, burst, log_max);
    if (!policy && algorithm == throttle::Algorithm::sliding_log) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": rate=%V burst=%L "
                           "keeps %L timestamps per key, more than "
                           "log_max=%L; raise log_max= (up to %L: 8 bytes "
                           "a timestamp per key) or use "
                           "algorithm=sliding_window",
                           &name, &rate_text, burst, rate.count + burst,
                           log_max, throttle::kMaxLogMax);
        return (char *) NGX_CONF_ERROR;
    }

    if (!policy) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_zone\" \"%V\": %s (rate=%V burst=%L)",
                           &name, policy.error, &rate_text, burst);
        return (char *) NGX_CONF_ERROR;
    }

    /* before ngx_shared_memory_add(), whose message for a size conflict
     * would not say which directive is at fault */
    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    zones = (ngx_http_throttle_zone_t **) tmcf->zones.elts;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (zones[i]->name.len == name.len
            && ngx_strncmp(zones[i]->name.data, name.data, name.len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate \"throttle_zone\" \"%V\": it is "
                               "already defined with the \"%V\" key",
                               &name, &zones[i]->key.value);
            return (char *) NGX_CONF_ERROR;
        }
    }

    shm_zone =
        ngx_shared_memory_add(cf, &name, size, &ngx_http_throttle_module);
    if (shm_zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    zonep = (ngx_http_throttle_zone_t **) ngx_array_push(&tmcf->zones);
    if (zonep == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    *zonep = zone;

    zone->name = shm_zone->shm.name;
    zone->policy = *policy.value;
    zone->shm_zone = shm_zone;
    zone->file = cf->conf_file->file.name;
    zone->line = cf->conf_file->line;

    shm_zone->init = ngx_http_throttle_init_zone;
    shm_zone->data = zone;

    return NGX_CONF_OK;
}

static char *
ngx_http_throttle(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    ngx_http_throttle_loc_conf_t *tlcf = (ngx_http_throttle_loc_conf_t *) conf;

    ngx_str_t                       *value, v, name, cost_text;
    ngx_uint_t                       i;
    ngx_shm_zone_t                  *shm_zone;
    ngx_http_throttle_limit_t       *limit, *limits;
    ngx_http_throttle_zone_ref_t    *ref;
    ngx_http_throttle_main_conf_t   *tmcf;
    ngx_http_compile_complex_value_t ccv;

    value = (ngx_str_t *) cf->args->elts;

    ngx_str_null(&name);
    ngx_str_null(&cost_text);

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_http_throttle_param(&value[i], "zone=", &v)) {
            name = v;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "cost=", &v)) {
            cost_text = v;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" in \"throttle\"",
                           &value[i]);
        return (char *) NGX_CONF_ERROR;
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle\" must have \"zone=name\" parameter");
        return (char *) NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &name, 0, &ngx_http_throttle_module);
    if (shm_zone == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    if (tlcf->limits == NULL) {
        tlcf->limits =
            ngx_array_create(cf->pool, 1, sizeof(ngx_http_throttle_limit_t));
        if (tlcf->limits == NULL) {
            return (char *) NGX_CONF_ERROR;
        }
    }

    limits = (ngx_http_throttle_limit_t *) tlcf->limits->elts;

    for (i = 0; i < tlcf->limits->nelts; i++) {
        if (limits[i].shm_zone == shm_zone) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate \"throttle\" for zone \"%V\" in "
                               "the same block",
                               &name);
            return (char *) NGX_CONF_ERROR;
        }
    }

    limit = (ngx_http_throttle_limit_t *) ngx_array_push(tlcf->limits);
    if (limit == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    limit->shm_zone = shm_zone;
    limit->cost = NULL;
    limit->cost_value = 1;

    if (cost_text.len && ngx_http_script_variables_count(&cost_text)) {
        limit->cost = (ngx_http_complex_value_t *) ngx_palloc(
            cf->pool, sizeof(ngx_http_complex_value_t));
        if (limit->cost == NULL) {
            return (char *) NGX_CONF_ERROR;
        }

        ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
        ccv.cf = cf;
        ccv.value = &cost_text;
        ccv.complex_value = limit->cost;

        if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
            return (char *) NGX_CONF_ERROR;
        }

    } else if (cost_text.data) {
        auto parsed = throttle::parse_count(ngx_http_throttle_sv(cost_text),
                                            throttle::kMaxCost);
        if (!parsed) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid cost \"%V\" in \"throttle\": it %s",
                               &cost_text, parsed.error);
            return (char *) NGX_CONF_ERROR;
        }

        limit->cost_value = *parsed.value;
    }

    /* keep the lines sorted by zone name: the handler locks zones in this
     * order, the same in every worker and every location */
    limits = (ngx_http_throttle_limit_t *) tlcf->limits->elts;

    for (i = tlcf->limits->nelts - 1; i > 0; i--) {
        ngx_str_t *a = &limits[i - 1].shm_zone->shm.name;
        ngx_str_t *b = &limits[i].shm_zone->shm.name;

        if (ngx_memn2cmp(a->data, b->data, a->len, b->len) <= 0) {
            break;
        }

        ngx_http_throttle_limit_t tmp = limits[i - 1];
        limits[i - 1] = limits[i];
        limits[i] = tmp;
    }

    /* remember where the zone was named, to report an undefined one */
    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    ref = (ngx_http_throttle_zone_ref_t *) ngx_array_push(&tmcf->zone_refs);
    if (ref == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    ref->shm_zone = shm_zone;
    ref->file = cf->conf_file->file.name;
    ref->line = cf->conf_file->line;

    return NGX_CONF_OK;
}

/* ngx_conf_set_enum_slot, with a message that names the directive and the
 * accepted values */
static char *
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

static char *
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

static void *
ngx_http_throttle_create_main_conf(ngx_conf_t *cf) noexcept
{
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_pcalloc(
        cf->pool, sizeof(ngx_http_throttle_main_conf_t));
    if (tmcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&tmcf->redis, cf->pool, 2,
                       sizeof(ngx_http_throttle_redis_t *))
        != NGX_OK)
    {
        return NULL;
    }

    if (ngx_array_init(&tmcf->zones, cf->pool, 4,
                       sizeof(ngx_http_throttle_zone_t *))
        != NGX_OK)
    {
        return NULL;
    }

    if (ngx_array_init(&tmcf->zone_refs, cf->pool, 4,
                       sizeof(ngx_http_throttle_zone_ref_t))
        != NGX_OK)
    {
        return NULL;
    }

    return tmcf;
}

static void *
ngx_http_throttle_create_loc_conf(ngx_conf_t *cf) noexcept
{
    ngx_http_throttle_loc_conf_t *conf;

    conf = (ngx_http_throttle_loc_conf_t *) ngx_pcalloc(
        cf->pool, sizeof(ngx_http_throttle_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->limits = NULL;
     */

    conf->status = NGX_CONF_UNSET_UINT;
    conf->headers = NGX_CONF_UNSET_UINT;
    conf->dry_run = NGX_CONF_UNSET;
    conf->log_level = NGX_CONF_UNSET_UINT;
    conf->on_error = NGX_CONF_UNSET_UINT;

    return conf;
}

static char *
ngx_http_throttle_merge_loc_conf(ngx_conf_t *cf, void *parent,
                                 void *child) noexcept
{
    ngx_http_throttle_loc_conf_t *prev =
        (ngx_http_throttle_loc_conf_t *) parent;
    ngx_http_throttle_loc_conf_t *conf = (ngx_http_throttle_loc_conf_t *) child;

    /* as limit_req: a level with no "throttle" lines inherits the outer */
    if (conf->limits == NULL) {
        conf->limits = prev->limits;
    }

    ngx_conf_merge_uint_value(conf->status, prev->status,
                              NGX_HTTP_TOO_MANY_REQUESTS);
    ngx_conf_merge_uint_value(conf->headers, prev->headers,
                              NGX_HTTP_THROTTLE_HEADERS_ON);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    ngx_conf_merge_uint_value(conf->on_error, prev->on_error,
                              NGX_HTTP_THROTTLE_ON_ERROR_ALLOW);

    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_throttle_init(ngx_conf_t *cf) noexcept
{
    ngx_uint_t                     i, j;
    ngx_http_handler_pt           *h;
    ngx_http_core_main_conf_t     *cmcf;
    ngx_http_throttle_zone_t     **zones;
    ngx_http_throttle_redis_t    **backends;
    ngx_http_throttle_zone_ref_t  *refs;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    /* zones name their backend; throttle_redis may come later in the file */
    zones = (ngx_http_throttle_zone_t **) tmcf->zones.elts;
    backends = (ngx_http_throttle_redis_t **) tmcf->redis.elts;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (zones[i]->redis_name.len == 0) {
            continue;
        }

        for (j = 0; j < tmcf->redis.nelts; j++) {
            if (backends[j]->name.len == zones[i]->redis_name.len
                && ngx_strncmp(backends[j]->name.data,
                               zones[i]->redis_name.data, backends[j]->name.len)
                    == 0)
            {
                zones[i]->redis = backends[j];
                break;
            }
        }

        if (zones[i]->redis == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "unknown redis=%V in \"throttle_zone\" \"%V\": no "
                          "\"throttle_redis\" has that name in %V:%ui",
                          &zones[i]->redis_name, &zones[i]->name,
                          &zones[i]->file, zones[i]->line);
            return NGX_ERROR;
        }
    }

    refs = (ngx_http_throttle_zone_ref_t *) tmcf->zone_refs.elts;

    for (i = 0; i < tmcf->zone_refs.nelts; i++) {
        if (refs[i].shm_zone->data == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "unknown zone \"%V\" in \"throttle\" directive in "
                          "%V:%ui: no \"throttle_zone\" defines it",
                          &refs[i].shm_zone->shm.name, &refs[i].file,
                          refs[i].line);
            return NGX_ERROR;
        }
    }

    cmcf = (ngx_http_core_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_core_module);

    /* The preaccess phase, as limit_req's: it runs for every main request
     * whatever "satisfy" says (in the access phase "satisfy any" would let
     * an earlier passing check skip the limiter, and would read a 401 or 403
     * throttle_status as a failed access check), and before access checks
     * such as auth_request, which a flood should not reach. */
    h = (ngx_http_handler_pt *) ngx_array_push(
        &cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_throttle_handler;

    return ngx_http_throttle_filter_init(cf);
}

static char *
ngx_http_throttle_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) noexcept
{
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    return ngx_http_throttle_redis_directive(cf, &tmcf->redis);
}

static ngx_http_throttle_main_conf_t *
ngx_http_throttle_cycle_main_conf(ngx_cycle_t *cycle) noexcept
{
    if (ngx_get_conf(cycle->conf_ctx, ngx_http_module) == NULL) {
        return NULL; /* no http block */
    }

    return (ngx_http_throttle_main_conf_t *)
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_throttle_module);
}

static ngx_int_t
ngx_http_throttle_init_process(ngx_cycle_t *cycle) noexcept
{
    ngx_uint_t                     i;
    ngx_http_throttle_zone_t     **zones;
    ngx_http_throttle_redis_t    **backends;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = ngx_http_throttle_cycle_main_conf(cycle);
    if (tmcf == NULL) {
        return NGX_OK;
    }

    backends = (ngx_http_throttle_redis_t **) tmcf->redis.elts;

    for (i = 0; i < tmcf->redis.nelts; i++) {
        if (ngx_http_throttle_redis_init_worker(cycle, backends[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    zones = (ngx_http_throttle_zone_t **) tmcf->zones.elts;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (zones[i]->sync == NGX_HTTP_THROTTLE_SYNC_ASYNC
            && ngx_http_throttle_async_init_worker(cycle, zones[i]) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

static void
ngx_http_throttle_exit_process(ngx_cycle_t *cycle) noexcept
{
    ngx_uint_t                     i;
    ngx_http_throttle_redis_t    **backends;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = ngx_http_throttle_cycle_main_conf(cycle);
    if (tmcf == NULL) {
        return;
    }

    backends = (ngx_http_throttle_redis_t **) tmcf->redis.elts;

    for (i = 0; i < tmcf->redis.nelts; i++) {
        ngx_http_throttle_redis_exit_worker(backends[i]);
    }
}
