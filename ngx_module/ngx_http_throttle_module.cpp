/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ngx_http_throttle_module: the module's tables, its configurations'
 * creation and merge, and what happens once they are read and when a
 * worker starts or exits. The directives themselves are parsed in
 * ngx_http_throttle_zone_conf.cpp (throttle_zone), _loc_conf.cpp (throttle
 * and the location's settings) and _redis_conf.cpp (throttle_redis):
 *
 *     throttle_redis NAME server=host:port [password= username= database=
 *         tls tls_verify= tls_trusted_certificate= tls_name=
 *         connect_timeout= timeout= keepalive= prefix=];
 *     throttle_zone $key zone=name:size rate=30r/m [burst=N]
 *         [algorithm=gcra|fixed_window|sliding_window|sliding_log [log_max=N]]
 *         [redis=NAME [sync=strict|async] [sync_interval=100ms]];
 *     throttle zone=name [cost=N|$variable] [phase=preaccess|authorized]
 *         [delay=N];
 *     throttle_status, throttle_headers, throttle_dry_run,
 *     throttle_log_level, throttle_on_error
 *     throttle_metrics; (a location's content: ngx_http_throttle_metrics.cpp)
 *     throttle_api zones=name[,name...] [reset=on]; (a location's content:
 *         ngx_http_throttle_api.cpp)
 *
 * A dynamic module has no line in "nginx -V": the master logs the
 * module's version each time it loads a configuration (init_module).
 */

#include "ngx_http_throttle_endpoints.h"
#include "ngx_http_throttle_request.h"
#include "ngx_http_throttle_zone.h"
#include "ngx_http_throttle_params.h"

static void     *ngx_http_throttle_create_main_conf(ngx_conf_t *cf) noexcept;
static void     *ngx_http_throttle_create_loc_conf(ngx_conf_t *cf) noexcept;
static char     *ngx_http_throttle_merge_loc_conf(ngx_conf_t *cf, void *parent,
                                                  void *child) noexcept;
static ngx_int_t ngx_http_throttle_init(ngx_conf_t *cf) noexcept;
static char     *ngx_http_throttle_redis(ngx_conf_t *cf, ngx_command_t *cmd,
                                         void *conf) noexcept;
static ngx_int_t ngx_http_throttle_init_module(ngx_cycle_t *cycle) noexcept;
static ngx_int_t ngx_http_throttle_init_process(ngx_cycle_t *cycle) noexcept;
static void      ngx_http_throttle_exit_process(ngx_cycle_t *cycle) noexcept;

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
     ngx_http_throttle_zone_directive, 0, 0, NULL},

    {ngx_string("throttle_redis"), NGX_HTTP_MAIN_CONF | NGX_CONF_2MORE,
     ngx_http_throttle_redis, 0, 0, NULL},

    {ngx_string("throttle"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF
         | NGX_CONF_TAKE1234,
     ngx_http_throttle_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},

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

    {ngx_string("throttle_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
     ngx_http_throttle_metrics_directive, 0, 0, NULL},

    {ngx_string("throttle_api"),
     NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS | NGX_CONF_TAKE12,
     ngx_http_throttle_api_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},

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
    ngx_http_throttle_init_module,  /* init module */
    ngx_http_throttle_init_process, /* init process */
    NULL,                           /* init thread */
    NULL,                           /* exit thread */
    ngx_http_throttle_exit_process, /* exit process */
    NULL,                           /* exit master */
    NGX_MODULE_V1_PADDING};

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
     *     conf->limits[] = { NULL };
     *     conf->api_zones = NULL;
     *     conf->api_reset = 0;   (off: throttle_api's reset= sets it)
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

    /* as limit_req: a level with no "throttle" lines, of either phase,
     * inherits the outer level's */
    if (conf->limits[NGX_HTTP_THROTTLE_PREACCESS] == NULL
        && conf->limits[NGX_HTTP_THROTTLE_AUTHORIZED] == NULL)
    {
        conf->limits[NGX_HTTP_THROTTLE_PREACCESS] =
            prev->limits[NGX_HTTP_THROTTLE_PREACCESS];
        conf->limits[NGX_HTTP_THROTTLE_AUTHORIZED] =
            prev->limits[NGX_HTTP_THROTTLE_AUTHORIZED];
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

/* Zones name their backend; throttle_redis may come later in the file. */
static ngx_int_t
ngx_http_throttle_resolve_redis(ngx_conf_t                    *cf,
                                ngx_http_throttle_main_conf_t *tmcf) noexcept
{
    ngx_uint_t                 i;
    ngx_http_throttle_zone_t **zones =
        (ngx_http_throttle_zone_t **) tmcf->zones.elts;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (zones[i]->redis_name.len == 0) {
            continue;
        }

        zones[i]->redis =
            ngx_http_throttle_find_named<ngx_http_throttle_redis_t>(
                &tmcf->redis, zones[i]->redis_name);

        if (zones[i]->redis == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "unknown redis=%V in \"throttle_zone\" \"%V\": no "
                          "\"throttle_redis\" has that name in %V:%ui",
                          &zones[i]->redis_name, &zones[i]->name,
                          &zones[i]->file, zones[i]->line);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

/* A line's parameter the zone it names cannot take: "invalid parameter
 * "delay=2" in "throttle" directive in F:L: zone "z" <why>". */
static ngx_int_t
ngx_http_throttle_ref_refused(ngx_conf_t                         *cf,
                              const ngx_http_throttle_zone_ref_t *ref,
                              const char *param, const ngx_str_t *value,
                              const char *refusal) noexcept
{
    ngx_http_throttle_zone_t *zone =
        (ngx_http_throttle_zone_t *) ref->shm_zone->data;

    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "invalid parameter \"%s%V\" in \"throttle\" directive in "
                  "%V:%ui: zone \"%V\" %s",
                  param, value, &ref->file, ref->line, &zone->name, refusal);
    return NGX_ERROR;
}

/* A "throttle" or "throttle_api" line may name a zone before its
 * throttle_zone, but not one that none defines; and a delay=, cost= or
 * settle= only a zone that can take it (the core says which). A line of a
 * concurrent= zone needs the log phase's handler, which frees its
 * requests' places. */
static ngx_int_t
ngx_http_throttle_check_refs(ngx_conf_t                    *cf,
                             ngx_http_throttle_main_conf_t *tmcf) noexcept
{
    ngx_uint_t                    i;
    u_char                        delay[NGX_INT64_LEN];
    ngx_str_t                     delay_text;
    const char                   *refusal;
    throttle::Message             why;
    ngx_http_throttle_zone_t     *zone;
    ngx_http_throttle_zone_ref_t *refs =
        (ngx_http_throttle_zone_ref_t *) tmcf->zone_refs.elts;

    for (i = 0; i < tmcf->zone_refs.nelts; i++) {
        zone = (ngx_http_throttle_zone_t *) refs[i].shm_zone->data;

        if (zone == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "unknown zone \"%V\" in \"%s\" directive in "
                          "%V:%ui: no \"throttle_zone\" defines it",
                          &refs[i].shm_zone->shm.name, refs[i].directive,
                          &refs[i].file, refs[i].line);
            return NGX_ERROR;
        }

        if (refs[i].delay_units != throttle::kNoDelay
            && (refusal = throttle::delay_refusal(zone->policy, why)))
        {
            delay_text.data = delay;
            delay_text.len =
                ngx_sprintf(delay, "%L", refs[i].delay_units) - delay;
            return ngx_http_throttle_ref_refused(
                cf, &refs[i], "delay=", &delay_text, refusal);
        }

        if (refs[i].cost.len
            && (refusal = throttle::cost_refusal(zone->policy, why))) {
            return ngx_http_throttle_ref_refused(
                cf, &refs[i], "cost=", &refs[i].cost, refusal);
        }

        if (refs[i].settle.len
            && (refusal = throttle::settle_refusal(zone->policy, why)))
        {
            return ngx_http_throttle_ref_refused(
                cf, &refs[i], "settle=", &refs[i].settle, refusal);
        }

        if (zone->policy.holds_places()) {
            tmcf->settle = 1;
        }
    }

    return NGX_OK;
}

/* settle= runs in the log phase, before every other handler there (its
 * handlers run in the order they were added, and access_log's was added
 * first), so that access_log sees $throttle_settled. Installed only when a
 * line has settle=. */
static ngx_int_t
ngx_http_throttle_first_log_handler(ngx_http_core_main_conf_t *cmcf) noexcept
{
    ngx_array_t         *handlers = &cmcf->phases[NGX_HTTP_LOG_PHASE].handlers;
    ngx_http_handler_pt *h;

    h = (ngx_http_handler_pt *) ngx_array_push(handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h = (ngx_http_handler_pt *) handlers->elts;
    ngx_memmove(&h[1], &h[0], (handlers->nelts - 1) * sizeof(*h));
    h[0] = ngx_http_throttle_settle_handler;

    return NGX_OK;
}

static ngx_int_t
ngx_http_throttle_init(ngx_conf_t *cf) noexcept
{
    ngx_http_handler_pt           *h;
    ngx_http_core_main_conf_t     *cmcf;
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_throttle_module);

    if (ngx_http_throttle_resolve_redis(cf, tmcf) != NGX_OK
        || ngx_http_throttle_check_refs(cf, tmcf) != NGX_OK
        || ngx_http_throttle_redis_metrics_zone(cf, &tmcf->redis,
                                                &ngx_http_throttle_module)
            != NGX_OK)
    {
        return NGX_ERROR;
    }

    cmcf = (ngx_http_core_main_conf_t *) ngx_http_conf_get_module_main_conf(
        cf, ngx_http_core_module);

    /* The default is the preaccess phase, as limit_req's: before access
     * checks such as auth_request, which a flood should not reach. Lines
     * with phase=authorized decide in the precontent phase, once the access
     * phase let the request in. Neither is the access phase itself, where
     * "satisfy any" would let an earlier passing check skip the limiter,
     * and would read a 401 or 403 throttle_status as a failed access
     * check. nginx runs a phase's handlers in the reverse order of their
     * registration, and this module's come after nginx's own: the
     * precontent one runs before try_files and mirror. It is installed only
     * when a line has phase=authorized: other configurations' requests do
     * not pass through it. */
    h = (ngx_http_handler_pt *) ngx_array_push(
        &cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_throttle_preaccess_handler;

    if (tmcf->authorized) {
        h = (ngx_http_handler_pt *) ngx_array_push(
            &cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
        if (h == NULL) {
            return NGX_ERROR;
        }

        *h = ngx_http_throttle_authorized_handler;
    }

    if (tmcf->settle && ngx_http_throttle_first_log_handler(cmcf) != NGX_OK) {
        return NGX_ERROR;
    }

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

/*
 * Runs in the master once per configuration loaded (start, reload, binary
 * upgrade) and in "nginx -t"; never in workers, nor in "nginx -s".
 */
static ngx_int_t
ngx_http_throttle_init_module(ngx_cycle_t *cycle) noexcept
{
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "ngx_http_throttle_module " NGX_HTTP_THROTTLE_VERSION);

    return NGX_OK;
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

    ngx_http_throttle_places_init_worker(cycle, tmcf);

    zones = (ngx_http_throttle_zone_t **) tmcf->zones.elts;

    for (i = 0; i < tmcf->zones.nelts; i++) {
        if (ngx_http_throttle_async(zones[i])
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
