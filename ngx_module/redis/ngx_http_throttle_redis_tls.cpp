/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * TLS to Redis, on nginx's SSL: the context of a backend with "tls" (made
 * at configuration, with the certificates it trusts), and on each new
 * connection the handshake, SNI, and the checks of the certificate and of
 * the name it must be for.
 */

#include "ngx_http_throttle_redis_tls.h"

#if (NGX_SSL)

/* The name the certificate must be for, also sent as SNI: tls_name=, or
 * the host the node was configured by, or (a node a cluster announced, a
 * master the sentinels named) its address. */
static ngx_str_t *
ngx_http_throttle_redis_tls_name(ngx_http_throttle_redis_node_t *node) noexcept
{
    ngx_http_throttle_redis_t *backend = node->worker->backend;

    if (backend->tls_name.len) {
        return &backend->tls_name;
    }

    if (node->host.len) {
        return &node->host;
    }

    return &node->address;
}

static bool
ngx_http_throttle_redis_is_address(ngx_str_t *name) noexcept
{
#if (NGX_HAVE_INET6)
    u_char addr6[16];

    if (ngx_inet6_addr(name->data, name->len, addr6) == NGX_OK) {
        return true;
    }
#endif

    return ngx_inet_addr(name->data, name->len) != INADDR_NONE;
}

/* ngx_ssl_check_host() matches host names; an address (server=127.0.0.1
 * and no tls_name=) is matched against the certificate's IP entries. */
static ngx_int_t
ngx_http_throttle_redis_check_name(ngx_connection_t *c,
                                   ngx_str_t        *name) noexcept
{
    X509  *cert;
    int    ok;
    u_char text[NGX_SOCKADDR_STRLEN + 1];

    if (!ngx_http_throttle_redis_is_address(name) || name->len >= sizeof(text))
    {
        return ngx_ssl_check_host(c, name);
    }

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    cert = SSL_get1_peer_certificate(c->ssl->connection);
#else
    cert = SSL_get_peer_certificate(c->ssl->connection);
#endif
    if (cert == NULL) {
        return NGX_ERROR;
    }

    ngx_cpystrn(text, name->data, name->len + 1);
    ok = X509_check_ip_asc(cert, (const char *) text, 0);
    X509_free(cert);

    return ok == 1 ? NGX_OK : NGX_ERROR;
}

const char *
ngx_http_throttle_redis_check_tls(ngx_http_throttle_redis_conn_t *conn,
                                  char *err, size_t size) noexcept
{
    long              rc;
    ngx_str_t        *name;
    ngx_connection_t *c = conn->peer.connection;

    if (!c->ssl->handshaked) {
        return "TLS handshake failed";
    }

    if (!conn->node->worker->backend->tls_verify) {
        return NULL;
    }

    rc = SSL_get_verify_result(c->ssl->connection);

    if (rc != X509_V_OK) {
        ngx_snprintf((u_char *) err, size - 1,
                     "TLS certificate verify error: (%l:%s)%Z", rc,
                     X509_verify_cert_error_string(rc));
        return err;
    }

    name = ngx_http_throttle_redis_tls_name(conn->node);

    if (ngx_http_throttle_redis_check_name(c, name) != NGX_OK) {
        ngx_snprintf((u_char *) err, size - 1,
                     "TLS certificate does not match \"%V\"%Z", name);
        return err;
    }

    return NULL;
}

ngx_int_t
ngx_http_throttle_redis_start_tls(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_str_t                 *name;
    ngx_connection_t          *c = conn->peer.connection;
    ngx_http_throttle_redis_t *backend = conn->node->worker->backend;
    u_char                     sni[256];

    if (ngx_ssl_create_connection(backend->ssl, c,
                                  NGX_SSL_BUFFER | NGX_SSL_CLIENT)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    name = ngx_http_throttle_redis_tls_name(conn->node);

    /* SNI takes a host name, not an address */
    if (name->len && name->len < sizeof(sni)
        && !ngx_http_throttle_redis_is_address(name))
    {
        ngx_cpystrn(sni, name->data, name->len + 1);
        SSL_set_tlsext_host_name(c->ssl->connection, (char *) sni);
    }

    /* a handshake that failed has ended too: check_tls() says so */
    return ngx_ssl_handshake(c) == NGX_AGAIN ? NGX_AGAIN : NGX_OK;
}

/* The certificates that may sign Redis's: tls_trusted_certificate=, or
 * the system's trust store. */
static char *
ngx_http_throttle_redis_set_trusted(ngx_conf_t                *cf,
                                    ngx_http_throttle_redis_t *backend) noexcept
{
    if (backend->tls_trusted_certificate.len == 0) {
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

/* The SSL context of a backend with "tls", freed with the cycle's
 * configuration. */
char *
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

    return ngx_http_throttle_redis_set_trusted(cf, backend);
}

#else

char *
ngx_http_throttle_redis_set_tls(ngx_conf_t                *cf,
                                ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"throttle_redis\" \"%V\": \"tls\" needs nginx built "
                       "with SSL",
                       &backend->name);
    return (char *) NGX_CONF_ERROR;
}

#endif
