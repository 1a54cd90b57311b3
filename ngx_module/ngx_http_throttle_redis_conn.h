/*
 * Inside the Redis transport: what its files share. The rest of the glue
 * uses ngx_http_throttle_redis.h only.
 *
 *   ngx_http_throttle_redis.cpp       a worker's connections to a backend,
 *                                     which one a command takes, backing off
 *   ngx_http_throttle_redis_conn.cpp  one connection: connecting, writing,
 *                                     reading, timeouts, closing
 *   ngx_http_throttle_redis_cmd.cpp   the commands on a connection: written
 *                                     in RESP, answered in order
 *   ngx_http_throttle_redis_tls.cpp   TLS: the context at configuration,
 *                                     the handshake and its checks
 *   ngx_http_throttle_redis_conf.cpp  the "throttle_redis" directive
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_CONN_H
#define NGX_HTTP_THROTTLE_REDIS_CONN_H

#include "ngx_http_throttle_log.h"
#include "ngx_http_throttle_redis.h"

#include <hiredis/hiredis.h>

typedef enum {
    NGX_HTTP_THROTTLE_REDIS_CLOSED = 0,
    NGX_HTTP_THROTTLE_REDIS_CONNECTING,
    NGX_HTTP_THROTTLE_REDIS_READY
} ngx_http_throttle_redis_state_e;

typedef struct {
    ngx_http_throttle_redis_worker_t *worker;
    ngx_peer_connection_t             peer;
    ngx_uint_t                        state;
    redisReader                      *reader;
    ngx_queue_t                       awaiting; /* commands, in order */
    u_char                           *out;      /* to write */
    size_t                            out_pos;
    size_t                            out_len;
    size_t                            out_size;
    /* bytes ever queued and written on this connection: a command whose
     * end is written has reached Redis */
    uint64_t appended;
    uint64_t written;
} ngx_http_throttle_redis_conn_t;

struct ngx_http_throttle_redis_worker_s {
    ngx_http_throttle_redis_t      *backend;
    ngx_http_throttle_redis_conn_t *conns; /* "keepalive" of them */
    ngx_uint_t                      next;  /* round robin, modulo "keepalive" */
    ngx_uint_t                      failures; /* in a row */
    ngx_msec_t                      retry_at;
    ngx_http_throttle_log_limit_t   error_log;
    ngx_log_t                      *log;
};

struct ngx_http_throttle_redis_cmd_s {
    ngx_queue_t                     queue;
    ngx_http_throttle_redis_done_pt done;
    void                           *data;
    ngx_msec_t                      deadline;
    ngx_msec_t                      timeout;
    const char                     *setup; /* AUTH, SELECT; NULL: a script */
    const throttle::Script         *script;
    uint64_t                        end; /* its last byte, in "appended" */
    unsigned                        sent_source : 1; /* as EVAL */
    unsigned                        sent : 1; /* written, set on failure */
    ngx_uint_t                      nkeys;
    ngx_uint_t                      nargs; /* keys and ARGV */
    ngx_str_t                       args[1];
};

/* ngx_http_throttle_redis.cpp */

void ngx_http_throttle_redis_back_off(ngx_http_throttle_redis_worker_t *worker,
                                      const char *err) noexcept;

/* ngx_http_throttle_redis_conn.cpp */

ngx_int_t
ngx_http_throttle_redis_connect(ngx_http_throttle_redis_conn_t *conn) noexcept;

void
ngx_http_throttle_redis_ready(ngx_http_throttle_redis_conn_t *conn) noexcept;

void ngx_http_throttle_redis_arm_timer(
    ngx_http_throttle_redis_conn_t *conn) noexcept;

void
ngx_http_throttle_redis_flush(ngx_http_throttle_redis_conn_t *conn) noexcept;

void ngx_http_throttle_redis_fail(ngx_http_throttle_redis_conn_t *conn,
                                  const char                     *err) noexcept;

/* ngx_http_throttle_redis_cmd.cpp */

ngx_int_t ngx_http_throttle_redis_queue_setup(
    ngx_http_throttle_redis_conn_t *conn) noexcept;

ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_conn_eval(ngx_http_throttle_redis_conn_t       *conn,
                                  const ngx_http_throttle_redis_call_t *call,
                                  ngx_http_throttle_redis_done_pt       done,
                                  void *data) noexcept;

bool ngx_http_throttle_redis_dispatch(ngx_http_throttle_redis_conn_t *conn,
                                      redisReply *reply) noexcept;

/* ngx_http_throttle_redis_tls.cpp */

#if (NGX_SSL)
void ngx_http_throttle_redis_start_tls(
    ngx_http_throttle_redis_conn_t *conn) noexcept;
#endif

char *
ngx_http_throttle_redis_set_tls(ngx_conf_t                *cf,
                                ngx_http_throttle_redis_t *backend) noexcept;

#endif /* NGX_HTTP_THROTTLE_REDIS_CONN_H */
