/*
 * throttle_redis NAME server=HOST:PORT [password=S] [username=U]
 *                [database=N] [tls] [tls_verify=on|off]
 *                [tls_trusted_certificate=PATH] [tls_name=NAME]
 *                [connect_timeout=100ms] [timeout=50ms] [keepalive=N]
 *                [prefix=throttle:];
 */

#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_redis_conn.h"

extern "C" {
#include <ngx_http.h>
}

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#define NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE 64
#define NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE 1000000

static char *
ngx_http_throttle_redis_server(ngx_conf_t                      *cf,
                               const ngx_http_throttle_param_t *param,
                               ngx_str_t *arg, ngx_str_t *v,
                               void *conf) noexcept
{
    ngx_url_t *url = &((ngx_http_throttle_redis_t *) conf)->url;

    url->url = *v;
    url->default_port = 6379;

    if (ngx_parse_url(cf->pool, url) != NGX_OK) {
        return ngx_http_throttle_invalid(cf, arg,
                                         url->err ? url->err : "bad address");
    }

    if (url->naddrs == 0 || url->family == AF_UNIX) {
        return ngx_http_throttle_invalid(cf, arg, "need a host and port");
    }

    return NGX_CONF_OK;
}

static const ngx_http_throttle_param_range_t ngx_http_throttle_redis_databases =
    {0, NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE,
     "the database is a number, 0 or more"};

static const ngx_http_throttle_param_range_t
    ngx_http_throttle_redis_keepalives = {1,
                                          NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE,
                                          "connections per worker, 1 to 64"};

static ngx_conf_enum_t ngx_http_throttle_redis_on_off[] = {
    {ngx_string("on"), 1},
    {ngx_string("off"), 0},
    {ngx_null_string, 0}};

static const ngx_http_throttle_param_enum_t ngx_http_throttle_redis_verify = {
    ngx_http_throttle_redis_on_off, "use on or off"};

static const ngx_http_throttle_param_t ngx_http_throttle_redis_params[] = {
    {"server=", ngx_http_throttle_redis_server, 0, NULL},
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
     &ngx_http_throttle_redis_verify},
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

/* What the parameters must say together, the defaults of those not given,
 * and TLS's setup. */
static char *
ngx_http_throttle_redis_check(ngx_conf_t                *cf,
                              ngx_http_throttle_redis_t *backend) noexcept
{
    if (backend->url.url.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\" must have "
                           "\"server=host:port\" parameter",
                           &backend->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (backend->username.len && backend->password.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": \"username=%V\" needs "
                           "\"password=\"",
                           &backend->name, &backend->username);
        return (char *) NGX_CONF_ERROR;
    }

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
     * set by ngx_pcalloc(): the strings, tls, database
     */

    backend->name = value[1];
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
