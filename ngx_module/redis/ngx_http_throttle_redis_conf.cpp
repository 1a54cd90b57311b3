/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_redis NAME server=HOST:PORT | cluster=HOST:PORT[,HOST:PORT...]
 *                     | sentinel=HOST:PORT[,HOST:PORT...] master=NAME
 *                [password=S] [username=U] [database=N] [tls]
 *                [tls_verify=on|off] [tls_trusted_certificate=PATH]
 *                [tls_name=NAME] [connect_timeout=100ms] [timeout=50ms]
 *                [keepalive=N] [prefix=throttle:]
 *                [max_redirects=5] [cluster_refresh=10s]
 *                [sentinel_password=S] [sentinel_username=U];
 */

#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_redis.h"
#include "ngx_http_throttle_redis_tls.h"

extern "C" {
#include <ngx_http.h>
}

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#define NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE 64
#define NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE 1000000
#define NGX_HTTP_THROTTLE_REDIS_MAX_ADDRESSES 64

/* What server=, cluster= and sentinel= say: the kind of backend, and its
 * usual port. */
typedef struct {
    ngx_uint_t topology;
    in_port_t  default_port;
    bool       list;
} ngx_http_throttle_redis_where_t;

static const ngx_http_throttle_redis_where_t ngx_http_throttle_redis_server = {
    NGX_HTTP_THROTTLE_REDIS_SERVER, 6379, false};
static const ngx_http_throttle_redis_where_t ngx_http_throttle_redis_cluster = {
    NGX_HTTP_THROTTLE_REDIS_CLUSTER, 6379, true};
static const ngx_http_throttle_redis_where_t ngx_http_throttle_redis_sentinels =
    {NGX_HTTP_THROTTLE_REDIS_SENTINEL, 26379, true};

/* The parameter of each topology, in the order of their values. */
static const char *ngx_http_throttle_redis_where_names[] = {
    "server=", "cluster=", "sentinel="};

/* The argument among the directive's that starts with "name", or NULL. */
static ngx_str_t *
ngx_http_throttle_redis_arg(ngx_conf_t *cf, const char *name) noexcept
{
    ngx_uint_t i;
    ngx_str_t *args = (ngx_str_t *) cf->args->elts;
    size_t     len = ngx_strlen(name);

    for (i = 2; i < cf->args->nelts; i++) {
        if (args[i].len >= len && ngx_strncmp(args[i].data, name, len) == 0) {
            return &args[i];
        }
    }

    return NULL;
}

/* One address of a list: host:port, resolved now. */
static char *
ngx_http_throttle_redis_address(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *text,
                                in_port_t    default_port,
                                ngx_array_t *addresses) noexcept
{
    ngx_url_t *url;

    url = (ngx_url_t *) ngx_array_push(addresses);
    if (url == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    ngx_memzero(url, sizeof(ngx_url_t));
    url->url = *text;
    url->default_port = default_port;

    if (ngx_parse_url(cf->pool, url) != NGX_OK) {
        return ngx_http_throttle_invalid(cf, arg,
                                         url->err ? url->err : "bad address");
    }

    if (url->naddrs == 0 || url->family == AF_UNIX) {
        return ngx_http_throttle_invalid(cf, arg, "need a host and port");
    }

    return NGX_CONF_OK;
}

/* server=, cluster= or sentinel=: where the backend is, and what it is. */
static char *
ngx_http_throttle_redis_where(ngx_conf_t                      *cf,
                              const ngx_http_throttle_param_t *param,
                              ngx_str_t *arg, ngx_str_t *v, void *conf) noexcept
{
    ngx_http_throttle_redis_t             *backend;
    const ngx_http_throttle_redis_where_t *where;
    ngx_str_t                              text, *other;
    u_char                                *p, *end, *comma;

    backend = (ngx_http_throttle_redis_t *) conf;
    where = (const ngx_http_throttle_redis_where_t *) param->post;

    if (backend->addresses.nelts) {
        /* the parameter that gave the addresses, named by the topology
         * it set */
        other = ngx_http_throttle_redis_arg(
            cf, ngx_http_throttle_redis_where_names[backend->topology]);
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": \"%V\" cannot be used "
                           "with \"%V\": give one of server=, cluster= or "
                           "sentinel=",
                           &backend->name, arg, other);
        return (char *) NGX_CONF_ERROR;
    }

    backend->topology = where->topology;

    if (!where->list || v->len == 0) {
        return ngx_http_throttle_redis_address(cf, arg, v, where->default_port,
                                               &backend->addresses);
    }

    for (p = v->data, end = v->data + v->len; p <= end; p = comma + 1) {
        comma = ngx_strlchr(p, end, ',');
        comma = comma ? comma : end;
        text.data = p;
        text.len = comma - p;

        if (text.len == 0) {
            return ngx_http_throttle_invalid(cf, arg, "an empty address");
        }

        if (backend->addresses.nelts == NGX_HTTP_THROTTLE_REDIS_MAX_ADDRESSES) {
            return ngx_http_throttle_invalid(cf, arg, "at most 64 addresses");
        }

        if (ngx_http_throttle_redis_address(cf, arg, &text, where->default_port,
                                            &backend->addresses)
            != NGX_CONF_OK)
        {
            return (char *) NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_master(ngx_conf_t                      *cf,
                               const ngx_http_throttle_param_t *param,
                               ngx_str_t *arg, ngx_str_t *v,
                               void *conf) noexcept
{
    if (v->len == 0) {
        return ngx_http_throttle_invalid(cf, arg, "a master name");
    }

    return ngx_http_throttle_param_str(cf, param, arg, v, conf);
}

static const ngx_http_throttle_param_range_t ngx_http_throttle_redis_databases =
    {0, NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE,
     "the database is a number, 0 or more"};

static const ngx_http_throttle_param_range_t
    ngx_http_throttle_redis_keepalives = {1,
                                          NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE,
                                          "connections per worker, 1 to 64"};

static const ngx_http_throttle_param_range_t ngx_http_throttle_redis_redirects =
    {0, 16, "redirections per command, 0 to 16"};

static const ngx_http_throttle_param_range_t ngx_http_throttle_redis_refresh = {
    1000, 3600000, "from 1s to 1h"};

static const ngx_http_throttle_param_t ngx_http_throttle_redis_params[] = {
    {"server=", ngx_http_throttle_redis_where, 0,
     &ngx_http_throttle_redis_server},
    {"cluster=", ngx_http_throttle_redis_where, 0,
     &ngx_http_throttle_redis_cluster},
    {"sentinel=", ngx_http_throttle_redis_where, 0,
     &ngx_http_throttle_redis_sentinels},
    {"master=", ngx_http_throttle_redis_master,
     offsetof(ngx_http_throttle_redis_t, master), NULL},
    {"sentinel_password=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, sentinel_password), NULL},
    {"sentinel_username=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, sentinel_username), NULL},
    {"max_redirects=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_redis_t, max_redirects),
     &ngx_http_throttle_redis_redirects},
    {"cluster_refresh=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_redis_t, cluster_refresh),
     &ngx_http_throttle_redis_refresh},
    {"password=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, password), NULL},
    {"username=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, username), NULL},
    {"database=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_redis_t, database),
     &ngx_http_throttle_redis_databases},
    {"tls", ngx_http_throttle_param_flag,
     offsetof(ngx_http_throttle_redis_t, tls), NULL},
    {"tls_verify=", ngx_http_throttle_param_enum,
     offsetof(ngx_http_throttle_redis_t, tls_verify),
     &ngx_http_throttle_param_on_off},
    {"tls_trusted_certificate=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, tls_trusted_certificate), NULL},
    {"tls_name=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, tls_name), NULL},
    {"connect_timeout=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_redis_t, connect_timeout), NULL},
    {"timeout=", ngx_http_throttle_param_msec,
     offsetof(ngx_http_throttle_redis_t, timeout), NULL},
    {"keepalive=", ngx_http_throttle_param_number,
     offsetof(ngx_http_throttle_redis_t, keepalive),
     &ngx_http_throttle_redis_keepalives},
    {"prefix=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_redis_t, prefix), NULL},
    {NULL, NULL, 0, NULL}};

/* A parameter that only means something with another one: named in the
 * message as it was written. */
static char *
ngx_http_throttle_redis_needs(ngx_conf_t                *cf,
                              ngx_http_throttle_redis_t *backend,
                              const char *name, bool given,
                              const char *needed) noexcept
{
    ngx_str_t *arg = ngx_http_throttle_redis_arg(cf, name);

    if (arg == NULL || given) {
        return NGX_CONF_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"throttle_redis\" \"%V\": \"%V\" needs \"%s\"",
                       &backend->name, arg, needed);
    return (char *) NGX_CONF_ERROR;
}

/* Parameters of one kind of backend only, and those that need another. */
static char *
ngx_http_throttle_redis_check_needs(ngx_conf_t                *cf,
                                    ngx_http_throttle_redis_t *backend) noexcept
{
    static const struct {
        const char *name;
        const char *needed;
    } needs[] = {{"max_redirects=", "cluster="},
                 {"cluster_refresh=", "cluster="},
                 {"master=", "sentinel="},
                 {"sentinel_password=", "sentinel="},
                 {"sentinel_username=", "sentinel="},
                 {"sentinel_username=", "sentinel_password="},
                 {"username=", "password="},
                 {"sentinel=", "master="}};

    bool cluster = backend->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER;
    bool sentinel = backend->topology == NGX_HTTP_THROTTLE_REDIS_SENTINEL;
    bool given[] = {cluster,
                    cluster,
                    sentinel,
                    sentinel,
                    sentinel,
                    backend->sentinel_password.len > 0,
                    backend->password.len > 0,
                    backend->master.len > 0};

    for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
        if (ngx_http_throttle_redis_needs(cf, backend, needs[i].name, given[i],
                                          needs[i].needed)
            != NGX_CONF_OK)
        {
            return (char *) NGX_CONF_ERROR;
        }
    }

    if (cluster && backend->database > 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": \"database=%i\" "
                           "cannot be used with \"cluster=\": a Redis Cluster "
                           "has database 0 only",
                           &backend->name, backend->database);
        return (char *) NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}

/* What the parameters must say together, the defaults of those not given,
 * and TLS's setup. */
static char *
ngx_http_throttle_redis_check(ngx_conf_t                *cf,
                              ngx_http_throttle_redis_t *backend) noexcept
{
    if (backend->addresses.nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\" must have "
                           "\"server=host:port\", \"cluster=host:port,...\" "
                           "or \"sentinel=host:port,...\" parameter",
                           &backend->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (ngx_http_throttle_redis_check_needs(cf, backend) != NGX_CONF_OK) {
        return (char *) NGX_CONF_ERROR;
    }

    ngx_conf_init_value(backend->max_redirects, 5);
    ngx_conf_init_msec_value(backend->cluster_refresh, 10000);

    if (!backend->tls
        && (backend->tls_verify != NGX_CONF_UNSET || backend->tls_name.len
            || backend->tls_trusted_certificate.len))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": tls_* parameters "
                           "need \"tls\"",
                           &backend->name);
        return (char *) NGX_CONF_ERROR;
    }

    ngx_conf_init_value(backend->tls_verify, 1);
    ngx_conf_init_msec_value(backend->connect_timeout, 100);
    ngx_conf_init_msec_value(backend->timeout, 50);
    ngx_conf_init_uint_value(backend->keepalive, 2);

    if (backend->prefix.data == NULL) {
        ngx_str_set(&backend->prefix, "throttle:");
    }

    if (!backend->tls) {
        return NGX_CONF_OK;
    }

    return ngx_http_throttle_redis_set_tls(cf, backend);
}

char *
ngx_http_throttle_redis_directive(ngx_conf_t  *cf,
                                  ngx_array_t *backends) noexcept
{
    ngx_str_t                 *value = (ngx_str_t *) cf->args->elts;
    ngx_http_throttle_redis_t *backend, **slot;

    if (!throttle::valid_zone_name(ngx_http_throttle_sv(value[1]))) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid name \"%V\" in \"throttle_redis\": use "
                           "letters, digits, \"_\", \"-\" or \".\"",
                           &value[1]);
        return (char *) NGX_CONF_ERROR;
    }

    if (ngx_http_throttle_find_named<ngx_http_throttle_redis_t>(backends,
                                                                value[1])) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate \"throttle_redis\" \"%V\"", &value[1]);
        return (char *) NGX_CONF_ERROR;
    }

    backend = (ngx_http_throttle_redis_t *) ngx_pcalloc(
        cf->pool, sizeof(ngx_http_throttle_redis_t));
    if (backend == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    /*
     * set by ngx_pcalloc(): the strings, tls, database, topology
     */

    if (ngx_array_init(&backend->addresses, cf->pool, 1, sizeof(ngx_url_t))
        != NGX_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    backend->name = value[1];
    backend->max_redirects = NGX_CONF_UNSET;
    backend->cluster_refresh = NGX_CONF_UNSET_MSEC;
    backend->tls_verify = NGX_CONF_UNSET;
    backend->connect_timeout = NGX_CONF_UNSET_MSEC;
    backend->timeout = NGX_CONF_UNSET_MSEC;
    backend->keepalive = NGX_CONF_UNSET_UINT;

    if (ngx_http_throttle_parse_params(cf, 2, ngx_http_throttle_redis_params,
                                       backend)
            != NGX_CONF_OK
        || ngx_http_throttle_redis_check(cf, backend) != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    slot = (ngx_http_throttle_redis_t **) ngx_array_push(backends);
    if (slot == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    *slot = backend;
    return NGX_CONF_OK;
}
