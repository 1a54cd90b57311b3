/* SPDX-License-Identifier: BSD-2-Clause */
/* TLS to Redis: the context at configuration; on a connection, the
 * handshake and the checks of the certificate. */

#ifndef NGX_HTTP_THROTTLE_REDIS_TLS_H
#define NGX_HTTP_THROTTLE_REDIS_TLS_H

#include "ngx_http_throttle_redis_types.h"

char *
ngx_http_throttle_redis_set_tls(ngx_conf_t                *cf,
                                ngx_http_throttle_redis_t *backend) noexcept;

#if (NGX_SSL)
/* Starts the handshake on a connection just connected: NGX_AGAIN while it
 * goes on (c->ssl->handler is called at its end), NGX_OK when it has ended
 * (check_tls() says how), NGX_ERROR if TLS could not be set up. */
ngx_int_t ngx_http_throttle_redis_start_tls(
    ngx_http_throttle_redis_conn_t *conn) noexcept;

/* After the handshake: NULL if it succeeded and the certificate is one to
 * trust, else why not (written into "err"). */
const char *
ngx_http_throttle_redis_check_tls(ngx_http_throttle_redis_conn_t *conn,
                                  char *err, size_t size) noexcept;
#endif

#endif /* NGX_HTTP_THROTTLE_REDIS_TLS_H */
