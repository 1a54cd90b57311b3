/*
 * throttle_redis NAME server=HOST:PORT [password=S] [username=U]
 *                [database=N] [tls] [tls_verify=on|off]
 *                [tls_trusted_certificate=PATH] [tls_name=NAME]
 *                [connect_timeout=100ms] [timeout=50ms] [keepalive=N]
 *                [prefix=throttle:];
 */

#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_redis.h"

extern "C" {
#include <ngx_http.h>
}

#include "throttle/headers.hpp"
#include "throttle/parse.hpp"

#include <new>

#define NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE 64
#define NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE 1000000

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

/* throttle_redis's parameters, while they are read. */
typedef struct {
    ngx_http_throttle_redis_t *backend;
    ngx_flag_t                 tls_options; /* a tls_* parameter was given */
} ngx_http_throttle_redis_args_t;

#define ngx_http_throttle_redis_backend(conf)                                  \
    (((ngx_http_throttle_redis_args_t *) (conf))->backend)

static char *
ngx_http_throttle_redis_server(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                               void *conf) noexcept
{
    ngx_url_t *url = &ngx_http_throttle_redis_backend(conf)->url;

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

static char *
ngx_http_throttle_redis_password(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                 void *conf) noexcept
{
    ngx_http_throttle_redis_backend(conf)->password = *v;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_username(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                 void *conf) noexcept
{
    ngx_http_throttle_redis_backend(conf)->username = *v;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_database(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                 void *conf) noexcept
{
    auto n = throttle::parse_count(ngx_http_throttle_sv(*v),
                                   NGX_HTTP_THROTTLE_REDIS_MAX_DATABASE);
    if (!n) {
        return ngx_http_throttle_invalid(cf, arg,
                                         "the database is a number, 0 or more");
    }

    ngx_http_throttle_redis_backend(conf)->database = (ngx_int_t) *n.value;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_tls(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                            void *conf) noexcept
{
    ngx_http_throttle_redis_backend(conf)->tls = 1;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_tls_verify(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                   void *conf) noexcept
{
    ngx_http_throttle_redis_args_t *ra =
        (ngx_http_throttle_redis_args_t *) conf;
    static ngx_str_t on = ngx_string("on");
    static ngx_str_t off = ngx_string("off");

    if (ngx_http_throttle_str_eq(*v, on)) {
        ra->backend->tls_verify = 1;

    } else if (ngx_http_throttle_str_eq(*v, off)) {
        ra->backend->tls_verify = 0;

    } else {
        return ngx_http_throttle_invalid(cf, arg, "use on or off");
    }

    ra->tls_options = 1;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_tls_trusted_certificate(ngx_conf_t *cf, ngx_str_t *arg,
                                                ngx_str_t *v,
                                                void      *conf) noexcept
{
    ngx_http_throttle_redis_args_t *ra =
        (ngx_http_throttle_redis_args_t *) conf;

    ra->backend->tls_trusted_certificate = *v;
    ra->tls_options = 1;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_tls_name(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                 void *conf) noexcept
{
    ngx_http_throttle_redis_args_t *ra =
        (ngx_http_throttle_redis_args_t *) conf;

    ra->backend->tls_name = *v;
    ra->tls_options = 1;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_connect_timeout(ngx_conf_t *cf, ngx_str_t *arg,
                                        ngx_str_t *v, void *conf) noexcept
{
    if (ngx_http_throttle_parse_msec(
            v, &ngx_http_throttle_redis_backend(conf)->connect_timeout)
        != NGX_OK)
    {
        return ngx_http_throttle_invalid(cf, arg,
                                         "use a time such as 100ms or 1s");
    }

    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_timeout(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                void *conf) noexcept
{
    if (ngx_http_throttle_parse_msec(
            v, &ngx_http_throttle_redis_backend(conf)->timeout)
        != NGX_OK)
    {
        return ngx_http_throttle_invalid(cf, arg,
                                         "use a time such as 50ms or 1s");
    }

    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_keepalive(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                                  void *conf) noexcept
{
    auto n = throttle::parse_count(ngx_http_throttle_sv(*v),
                                   NGX_HTTP_THROTTLE_REDIS_MAX_KEEPALIVE);
    if (!n || *n.value == 0) {
        return ngx_http_throttle_invalid(cf, arg,
                                         "connections per worker, 1 to 64");
    }

    ngx_http_throttle_redis_backend(conf)->keepalive = (ngx_uint_t) *n.value;
    return NGX_CONF_OK;
}

static char *
ngx_http_throttle_redis_prefix(ngx_conf_t *cf, ngx_str_t *arg, ngx_str_t *v,
                               void *conf) noexcept
{
    ngx_http_throttle_redis_backend(conf)->prefix = *v;
    return NGX_CONF_OK;
}

static const ngx_http_throttle_param_t ngx_http_throttle_redis_params[] = {
    {"server=", ngx_http_throttle_redis_server},
    {"password=", ngx_http_throttle_redis_password},
    {"username=", ngx_http_throttle_redis_username},
    {"database=", ngx_http_throttle_redis_database},
    {"tls", ngx_http_throttle_redis_tls},
    {"tls_verify=", ngx_http_throttle_redis_tls_verify},
    {"tls_trusted_certificate=",
     ngx_http_throttle_redis_tls_trusted_certificate},
    {"tls_name=", ngx_http_throttle_redis_tls_name},
    {"connect_timeout=", ngx_http_throttle_redis_connect_timeout},
    {"timeout=", ngx_http_throttle_redis_timeout},
    {"keepalive=", ngx_http_throttle_redis_keepalive},
    {"prefix=", ngx_http_throttle_redis_prefix},
    {NULL, NULL}};

/* What the parameters must say together, and TLS's setup. */
static char *
ngx_http_throttle_redis_check(ngx_conf_t                     *cf,
                              ngx_http_throttle_redis_args_t *ra) noexcept
{
    ngx_http_throttle_redis_t *backend = ra->backend;

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

    if (ra->tls_options && !backend->tls) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"throttle_redis\" \"%V\": tls_* parameters "
                           "need \"tls\"",
                           &backend->name);
        return (char *) NGX_CONF_ERROR;
    }

    if (!backend->tls) {
        return NGX_CONF_OK;
    }

#if (NGX_SSL)
    return ngx_http_throttle_redis_set_tls(cf, backend);
#else
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"throttle_redis\" \"%V\": \"tls\" needs nginx built "
                       "with SSL",
                       &backend->name);
    return (char *) NGX_CONF_ERROR;
#endif
}

char *
ngx_http_throttle_redis_directive(ngx_conf_t  *cf,
                                  ngx_array_t *backends) noexcept
{
    ngx_str_t                     *value = (ngx_str_t *) cf->args->elts;
    ngx_http_throttle_redis_t     *backend, **slot;
    ngx_http_throttle_redis_args_t ra;

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

    backend->name = value[1];
    backend->tls_verify = 1;
    backend->connect_timeout = 100;
    backend->timeout = 50;
    backend->keepalive = 2;
    ngx_str_set(&backend->prefix, "throttle:");

    ra.backend = backend;
    ra.tls_options = 0;

    if (ngx_http_throttle_parse_params(cf, 2, ngx_http_throttle_redis_params,
                                       &ra)
            != NGX_CONF_OK
        || ngx_http_throttle_redis_check(cf, &ra) != NGX_CONF_OK)
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
