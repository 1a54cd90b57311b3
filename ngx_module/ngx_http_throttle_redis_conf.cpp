/*
 * throttle_redis NAME server=HOST:PORT [password=S] [username=U]
 *                [database=N] [tls] [tls_verify=on|off]
 *                [tls_trusted_certificate=PATH] [tls_name=NAME]
 *                [connect_timeout=100ms] [timeout=50ms] [keepalive=N]
 *                [prefix=throttle:];
 */

#include "ngx_http_throttle_redis.h"

extern "C" {
#include <ngx_http.h>
}

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#include <new>

#define NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE 64
#define NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE 1000000

static char *
ngx_http_throttle_redis_bad(ngx_conf_t *cf, ngx_str_t *arg,
                            const char *why) noexcept
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\" in \"throttle_redis\": %s",
                       arg, why);
    return (char *) NGX_CONF_ERROR;
}

static ngx_int_t
ngx_http_throttle_redis_msec(ngx_str_t *value, ngx_msec_t *msec) noexcept
{
    ngx_int_t n = ngx_parse_time(value, 0);

    if (n == NGX_ERROR || n == 0) {
        return NGX_ERROR;
    }

    *msec = (ngx_msec_t) n;
    return NGX_OK;
}

#if (NGX_SSL)

static char *
ngx_http_throttle_redis_set_tls(ngx_conf_t                *cf,
                                ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_pool_cleanup_t *cln;

    backend->ssl = (ngx_ssl_t *) ngx_pcalloc(cf->pool, sizeof(ngx_ssl_t));
    if (backend->ssl == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    backend->ssl->log = cf->log;

    if (ngx_ssl_create(backend->ssl, NGX_SSL_TLSv1_2 | NGX_SSL_TLSv1_3, NULL)
        != NGX_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        ngx_ssl_cleanup_ctx(backend->ssl);
        return (char *) NGX_CONF_ERROR;
    }

    cln->handler = ngx_ssl_cleanup_ctx;
    cln->data = backend->ssl;

    if (!backend->tls_verify) {
        return NGX_CONF_OK;
    }

    if (backend->tls_trusted_certificate.len == 0) {
        /* the system's trust store */
        if (SSL_CTX_set_default_verify_paths(backend->ssl->ctx) != 1) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"throttle_redis\" \"%V\": cannot load the "
                          "system's trusted certificates",
                          &backend->name);
            return (char *) NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    if (ngx_conf_full_name(cf->cycle, &backend->tls_trusted_certificate, 1)
            != NGX_OK
        || access((const char *) backend->tls_trusted_certificate.data, R_OK)
            != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "\"throttle_redis\" \"%V\": cannot read "
                           "tls_trusted_certificate=%V",
                           &backend->name, &backend->tls_trusted_certificate);
        return (char *) NGX_CONF_ERROR;
    }

    if (ngx_ssl_trusted_certificate(cf, backend->ssl,
                                    &backend->tls_trusted_certificate, 10)
        != NGX_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}

#endif

char *
ngx_http_throttle_redis_directive(ngx_conf_t  *cf,
                                  ngx_array_t *backends) noexcept
{
    ngx_str_t                 *value, v;
    ngx_uint_t                 i;
    ngx_flag_t                 tls_options = 0;
    ngx_http_throttle_redis_t *backend, **slot, **all;

    value = (ngx_str_t *) cf->args->elts;

    if (!throttle::valid_zone_name(
            {(const char *) value[1].data, value[1].len})) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid name \"%V\" in \"throttle_redis\": use "
                           "letters, digits, \"_\", \"-\" or \".\"",
                           &value[1]);
        return (char *) NGX_CONF_ERROR;
    }

    all = (ngx_http_throttle_redis_t **) backends->elts;

    for (i = 0; i < backends->nelts; i++) {
        if (all[i]->name.len == value[1].len
            && ngx_strncmp(all[i]->name.data, value[1].data, value[1].len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate \"throttle_redis\" \"%V\"",
                               &value[1]);
            return (char *) NGX_CONF_ERROR;
        }
    }

    backend = (ngx_http_throttle_redis_t *) ngx_pcalloc(
        cf->pool, sizeof(ngx_http_throttle_redis_t));
    if (backend == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    backend->name = value[1];
    backend->tls_verify = 1;
    backend->connect_timeout = 100;
    backend->timeout = 50;
    backend->keepalive = 2;
    ngx_str_set(&backend->prefix, "throttle:");

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_http_throttle_param(&value[i], "server=", &v)) {
            backend->url.url = v;
            backend->url.default_port = 6379;

            if (ngx_parse_url(cf->pool, &backend->url) != NGX_OK) {
                return ngx_http_throttle_redis_bad(
                    cf, &value[i],
                    backend->url.err ? backend->url.err : "bad address");
            }

            if (backend->url.naddrs == 0 || backend->url.family == AF_UNIX) {
                return ngx_http_throttle_redis_bad(cf, &value[i],
                                                   "need a host and port");
            }

            continue;
        }

        if (ngx_http_throttle_param(&value[i], "password=", &v)) {
            backend->password = v;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "username=", &v)) {
            backend->username = v;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "database=", &v)) {
            auto n =
                throttle::parse_count({(const char *) v.data, v.len},
                                      NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE);
            if (!n) {
                return ngx_http_throttle_redis_bad(
                    cf, &value[i], "the database is a number, 0 or more");
            }

            backend->database = (ngx_int_t) *n.value;
            continue;
        }

        if (value[i].len == 3 && ngx_strncmp(value[i].data, "tls", 3) == 0) {
            backend->tls = 1;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "tls_verify=", &v)) {
            if (v.len == 2 && ngx_strncmp(v.data, "on", 2) == 0) {
                backend->tls_verify = 1;

            } else if (v.len == 3 && ngx_strncmp(v.data, "off", 3) == 0) {
                backend->tls_verify = 0;

            } else {
                return ngx_http_throttle_redis_bad(cf, &value[i],
                                                   "use on or off");
            }

            tls_options = 1;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "tls_trusted_certificate=", &v))
        {
            backend->tls_trusted_certificate = v;
            tls_options = 1;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "tls_name=", &v)) {
            backend->tls_name = v;
            tls_options = 1;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "connect_timeout=", &v)) {
            if (ngx_http_throttle_redis_msec(&v, &backend->connect_timeout)
                != NGX_OK) {
                return ngx_http_throttle_redis_bad(
                    cf, &value[i], "use a time such as 100ms or 1s");
            }
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "timeout=", &v)) {
            if (ngx_http_throttle_redis_msec(&v, &backend->timeout) != NGX_OK) {
                return ngx_http_throttle_redis_bad(
                    cf, &value[i], "use a time such as 50ms or 1s");
            }
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "keepalive=", &v)) {
            auto n =
                throttle::parse_count({(const char *) v.data, v.len},
                                      NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE);
            if (!n || *n.value == 0) {
                return ngx_http_throttle_redis_bad(
                    cf, &value[i], "connections per worker, 1 to 64");
            }

            backend->keepalive = (ngx_uint_t) *n.value;
            continue;
        }

        if (ngx_http_throttle_param(&value[i], "prefix=", &v)) {
            backend->prefix = v;
            continue;
        }

        return ngx_http_throttle_redis_bad(cf, &value[i], "unknown");
    }

    if (backend->url.url.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\" must have "
                           "\"server=host:port\" parameter",
                           &value[1]);
        return (char *) NGX_CONF_ERROR;
    }

    if (backend->username.len && backend->password.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": \"username=%V\" needs "
                           "\"password=\"",
                           &value[1], &backend->username);
        return (char *) NGX_CONF_ERROR;
    }

    if (tls_options && !backend->tls) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": tls_* parameters "
                           "need \"tls\"",
                           &value[1]);
        return (char *) NGX_CONF_ERROR;
    }

    if (backend->tls) {
#if (NGX_SSL)
        if (ngx_http_throttle_redis_set_tls(cf, backend) != NGX_CONF_OK) {
            return (char *) NGX_CONF_ERROR;
        }
#else
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": \"tls\" needs nginx "
                           "built with SSL",
                           &value[1]);
        return (char *) NGX_CONF_ERROR;
#endif
    }

    slot = (ngx_http_throttle_redis_t **) ngx_array_push(backends);
    if (slot == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    *slot = backend;
    return NGX_CONF_OK;
}
