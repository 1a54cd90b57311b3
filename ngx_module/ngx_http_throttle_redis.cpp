/*
 * The Redis transport. Each worker keeps "keepalive" connections per
 * backend and spreads commands over them; commands on a connection are
 * pipelined (written as they come, answered in order), so one slow reply
 * means all later ones are late too: when the oldest command outlives
 * "timeout", the connection is closed, every command on it fails at once,
 * and the backend backs off (with jitter) before the next connect. While it
 * backs off, commands fail immediately, so requests never queue behind a
 * dead Redis.
 */

#include "ngx_http_throttle_log.h"
#include "ngx_http_throttle_redis.h"

extern "C" {
#include <ngx_http.h>
}

#include <hiredis/hiredis.h>

#include <new>

#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MIN 50   /* ms */
#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MAX 2000 /* ms */
#define NGX_HTTP_THROTTLE_REDIS_READ_SIZE 16384

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
    ngx_queue_t                       sent; /* awaiting replies */
    u_char                           *out;  /* to write */
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
    ngx_http_throttle_redis_conn_t *conns;
    ngx_uint_t                      next;
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
    const char                     *what; /* set for setup commands */
    const throttle::Script         *script;
    uint64_t                        end; /* its last byte, in "appended" */
    unsigned                        sent_source : 1;
    unsigned                        sent : 1;
    ngx_uint_t                      nkeys;
    ngx_uint_t                      nargs;
    ngx_str_t                       args[1];
};

static void ngx_http_throttle_redis_close(ngx_http_throttle_redis_conn_t *conn,
                                          const char *err) noexcept;
static void ngx_http_throttle_redis_read_handler(ngx_event_t *ev) noexcept;
static void ngx_http_throttle_redis_write_handler(ngx_event_t *ev) noexcept;

/* One line a second at most per backend and worker: a dead Redis under
 * load would otherwise write one line per request. */
static void
ngx_http_throttle_redis_log_error(ngx_http_throttle_redis_worker_t *worker,
                                  const char *err) noexcept
{
    ngx_http_throttle_redis_t *backend = worker->backend;

    if (!ngx_http_throttle_log_due(&worker->error_log, ngx_current_msec, 1000))
    {
        return;
    }

    ngx_log_error(
        NGX_LOG_ERR, worker->log, 0, "throttle redis \"%V\" (%V): %s%s",
        &backend->name, &backend->url.url, err,
        worker->error_log.suppressed ? " (and earlier errors, not logged)"
                                     : "");

    worker->error_log.suppressed = 0;
}

/* No new connection before a delay that doubles with each failure in a
 * row, with jitter so that workers and nodes do not reconnect in step. */
static void
ngx_http_throttle_redis_back_off(ngx_http_throttle_redis_worker_t *worker,
                                 const char                       *err) noexcept
{
    ngx_msec_t backoff;

    worker->failures++;
    backoff = (ngx_msec_t) NGX_HTTP_THROTTLE_REDIS_BACKOFF_MIN
        << ngx_min(worker->failures - 1, 10);
    backoff = ngx_min(backoff, NGX_HTTP_THROTTLE_REDIS_BACKOFF_MAX);
    backoff = backoff / 2 + (ngx_msec_t) ngx_random() % (backoff / 2 + 1);
    worker->retry_at = ngx_current_msec + backoff;

    ngx_http_throttle_redis_log_error(worker, err);
}

static ngx_int_t
ngx_http_throttle_redis_append(ngx_http_throttle_redis_conn_t *conn, int argc,
                               const char  **argv,
                               const size_t *argvlen) noexcept
{
    char   *cmd;
    int     len;
    size_t  size;
    u_char *out;

    len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0) {
        return NGX_ERROR;
    }

    if (conn->out_len + len > conn->out_size) {
        size = ngx_max(conn->out_size * 2, conn->out_len + len);
        out = (u_char *) ngx_alloc(size, conn->worker->log);
        if (out == NULL) {
            redisFreeCommand(cmd);
            return NGX_ERROR;
        }

        ngx_memcpy(out, conn->out + conn->out_pos,
                   conn->out_len - conn->out_pos);
        ngx_free(conn->out);

        conn->out = out;
        conn->out_len -= conn->out_pos;
        conn->out_pos = 0;
        conn->out_size = size;
    }

    ngx_memcpy(conn->out + conn->out_len, cmd, len);
    conn->out_len += len;
    conn->appended += len;
    redisFreeCommand(cmd);

    return NGX_OK;
}

/* EVALSHA sha nkeys keys... argv... or, when Redis has lost the script,
 * EVAL with its source. */
static ngx_int_t
ngx_http_throttle_redis_append_eval(ngx_http_throttle_redis_conn_t *conn,
                                    ngx_http_throttle_redis_cmd_t *cmd) noexcept
{
    const throttle::Script &script = *cmd->script;
    const char             *argv_small[16], **argv = argv_small;
    size_t                  argvlen_small[16], *argvlen = argvlen_small;
    size_t                  argc = 3 + cmd->nargs;
    u_char                  nkeys[NGX_INT_T_LEN];
    ngx_uint_t              i;
    ngx_int_t               rc;

    if (argc > 16) {
        /* a batch of async syncs */
        argv =
            (const char **) ngx_alloc(argc * sizeof(char *), conn->worker->log);
        argvlen =
            (size_t *) ngx_alloc(argc * sizeof(size_t), conn->worker->log);
        if (argv == NULL || argvlen == NULL) {
            ngx_free(argv);
            ngx_free(argvlen);
            return NGX_ERROR;
        }
    }

    argv[0] = cmd->sent_source ? "EVAL" : "EVALSHA";
    argvlen[0] = ngx_strlen(argv[0]);
    argv[1] = cmd->sent_source ? script.source.data() : script.sha1.data();
    argvlen[1] = cmd->sent_source ? script.source.size() : script.sha1.size();
    argv[2] = (const char *) nkeys;
    argvlen[2] = ngx_sprintf(nkeys, "%ui", cmd->nkeys) - nkeys;

    for (i = 0; i < cmd->nargs; i++) {
        argv[3 + i] = (const char *) cmd->args[i].data;
        argvlen[3 + i] = cmd->args[i].len;
    }

    rc = ngx_http_throttle_redis_append(conn, (int) argc, argv, argvlen);

    if (argv != argv_small) {
        ngx_free(argv);
        ngx_free(argvlen);
    }

    return rc;
}

static void
ngx_http_throttle_redis_arm_timer(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_event_t                   *rev = conn->peer.connection->read;
    ngx_http_throttle_redis_cmd_t *head;
    ngx_msec_int_t                 left;

    if (ngx_queue_empty(&conn->sent)) {
        if (rev->timer_set) {
            ngx_del_timer(rev);
        }
        return;
    }

    head = ngx_queue_data(ngx_queue_head(&conn->sent),
                          ngx_http_throttle_redis_cmd_t, queue);
    left = (ngx_msec_int_t) (head->deadline - ngx_current_msec);

    ngx_add_timer(rev, left > 0 ? (ngx_msec_t) left : 1);
}

static void
ngx_http_throttle_redis_flush(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_connection_t *c = conn->peer.connection;

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_READY
        && conn->out_pos < conn->out_len && !c->write->posted)
    {
        /* one write for all commands queued in this event loop turn */
        ngx_post_event(c->write, &ngx_posted_events);
    }
}

/* A command, with a copy of its arguments (to send it again as EVAL):
 * the keys as they are, the integers in decimal. */
static ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_cmd(ngx_http_throttle_redis_worker_t     *worker,
                            const ngx_http_throttle_redis_call_t *call) noexcept
{
    size_t                         size;
    u_char                        *p;
    ngx_uint_t                     i, nargs;
    ngx_http_throttle_redis_cmd_t *cmd;

    nargs = call ? call->nkeys + call->nargv : 0;
    size = sizeof(ngx_http_throttle_redis_cmd_t) + nargs * sizeof(ngx_str_t);

    for (i = 0; call && i < call->nkeys; i++) {
        size += call->keys[i].len;
    }

    size += (call ? call->nargv : 0) * NGX_INT64_LEN;

    p = (u_char *) ngx_alloc(size, worker->log);
    if (p == NULL) {
        return NULL;
    }

    cmd = new (p) ngx_http_throttle_redis_cmd_t();
    cmd->nargs = nargs;
    cmd->timeout = worker->backend->timeout;
    cmd->deadline = ngx_current_msec + cmd->timeout;

    if (call == NULL) {
        return cmd;
    }

    p = (u_char *) &cmd->args[nargs > 0 ? nargs : 1];

    for (i = 0; i < call->nkeys; i++) {
        cmd->args[i].data = p;
        cmd->args[i].len = call->keys[i].len;
        p = ngx_cpymem(p, call->keys[i].data, call->keys[i].len);
    }

    for (i = 0; i < call->nargv; i++) {
        cmd->args[call->nkeys + i].data = p;
        p = ngx_sprintf(p, "%L", call->argv[i]);
        cmd->args[call->nkeys + i].len = p - cmd->args[call->nkeys + i].data;
    }

    cmd->script = call->script;
    cmd->nkeys = call->nkeys;

    if (call->timeout) {
        cmd->timeout = call->timeout;
        cmd->deadline = ngx_current_msec + call->timeout;
    }

    return cmd;
}

static ngx_int_t
ngx_http_throttle_redis_setup(ngx_http_throttle_redis_conn_t *conn,
                              const char *what, int argc, const char **argv,
                              const size_t *argvlen) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;

    cmd = ngx_http_throttle_redis_cmd(conn->worker, NULL);
    if (cmd == NULL) {
        return NGX_ERROR;
    }

    cmd->what = what;

    if (ngx_http_throttle_redis_append(conn, argc, argv, argvlen) != NGX_OK) {
        ngx_free(cmd);
        return NGX_ERROR;
    }

    cmd->end = conn->appended;
    ngx_queue_insert_tail(&conn->sent, &cmd->queue);
    return NGX_OK;
}

/* AUTH and SELECT go first on a new connection, pipelined with whatever
 * the requests queue behind them. */
static ngx_int_t
ngx_http_throttle_redis_queue_setup(
    ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_http_throttle_redis_t *backend = conn->worker->backend;
    const char                *argv[3];
    size_t                     argvlen[3];
    u_char                     db[NGX_INT_T_LEN];
    int                        argc;

    if (backend->password.len) {
        argc = 0;
        argv[argc] = "AUTH";
        argvlen[argc++] = 4;

        if (backend->username.len) {
            argv[argc] = (const char *) backend->username.data;
            argvlen[argc++] = backend->username.len;
        }

        argv[argc] = (const char *) backend->password.data;
        argvlen[argc++] = backend->password.len;

        if (ngx_http_throttle_redis_setup(conn, "AUTH", argc, argv, argvlen)
            != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (backend->database > 0) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", backend->database) - db;

        if (ngx_http_throttle_redis_setup(conn, "SELECT", 2, argv, argvlen)
            != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

static void
ngx_http_throttle_redis_ready(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_connection_t *c = conn->peer.connection;

    conn->state = NGX_HTTP_THROTTLE_REDIS_READY;

    c->read->handler = ngx_http_throttle_redis_read_handler;
    c->write->handler = ngx_http_throttle_redis_write_handler;

    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    ngx_http_throttle_redis_arm_timer(conn);
    ngx_http_throttle_redis_flush(conn);

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_throttle_redis_close(conn, "cannot watch the connection");
    }
}

#if (NGX_SSL)

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

static void
ngx_http_throttle_redis_handshaked(ngx_connection_t *c) noexcept
{
    long                            rc;
    ngx_str_t                      *name;
    ngx_http_throttle_redis_conn_t *conn;
    ngx_http_throttle_redis_t      *backend;
    char                            err[256];

    conn = (ngx_http_throttle_redis_conn_t *) c->data;
    backend = conn->worker->backend;

    /* the reasons go through close(), whose log line is limited to one a
     * second: a bad certificate fails every reconnect */

    if (!c->ssl->handshaked) {
        ngx_http_throttle_redis_close(conn, "TLS handshake failed");
        return;
    }

    if (backend->tls_verify) {
        rc = SSL_get_verify_result(c->ssl->connection);

        if (rc != X509_V_OK) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1,
                         "TLS certificate verify error: (%l:%s)%Z", rc,
                         X509_verify_cert_error_string(rc));
            ngx_http_throttle_redis_close(conn, err);
            return;
        }

        name = backend->tls_name.len ? &backend->tls_name : &backend->url.host;

        if (ngx_http_throttle_redis_check_name(c, name) != NGX_OK) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1,
                         "TLS certificate does not match \"%V\"%Z", name);
            ngx_http_throttle_redis_close(conn, err);
            return;
        }
    }

    ngx_http_throttle_redis_ready(conn);
}

static void
ngx_http_throttle_redis_start_tls(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_int_t                  rc;
    ngx_str_t                 *name;
    ngx_connection_t          *c = conn->peer.connection;
    ngx_http_throttle_redis_t *backend = conn->worker->backend;
    u_char                     sni[256];

    if (ngx_ssl_create_connection(backend->ssl, c,
                                  NGX_SSL_BUFFER | NGX_SSL_CLIENT)
        != NGX_OK)
    {
        ngx_http_throttle_redis_close(conn, "TLS setup failed");
        return;
    }

    name = backend->tls_name.len ? &backend->tls_name : &backend->url.host;

    /* SNI takes a host name, not an address */
    if (name->len && name->len < sizeof(sni)
        && !ngx_http_throttle_redis_is_address(name))
    {
        ngx_cpystrn(sni, name->data, name->len + 1);
        SSL_set_tlsext_host_name(c->ssl->connection, (char *) sni);
    }

    rc = ngx_ssl_handshake(c);

    if (rc == NGX_AGAIN) {
        if (!c->write->timer_set) {
            ngx_add_timer(c->write, backend->connect_timeout);
        }
        c->ssl->handler = ngx_http_throttle_redis_handshaked;
        return;
    }

    ngx_http_throttle_redis_handshaked(c);
}

#endif

static void
ngx_http_throttle_redis_connected(ngx_http_throttle_redis_conn_t *conn) noexcept
{
#if (NGX_SSL)
    if (conn->worker->backend->tls) {
        ngx_http_throttle_redis_start_tls(conn);
        return;
    }
#endif

    ngx_http_throttle_redis_ready(conn);
}

static void
ngx_http_throttle_redis_connect_handler(ngx_event_t *ev) noexcept
{
    int                             err = 0;
    socklen_t                       len = sizeof(int);
    ngx_connection_t               *c = (ngx_connection_t *) ev->data;
    ngx_http_throttle_redis_conn_t *conn;

    conn = (ngx_http_throttle_redis_conn_t *) c->data;

    if (ev->timedout) {
        ngx_http_throttle_redis_close(conn, "timed out connecting");
        return;
    }

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len) == -1) {
        err = ngx_socket_errno;
    }

    if (err) {
        ngx_http_throttle_redis_close(conn, strerror(err));
        return;
    }

    ngx_http_throttle_redis_connected(conn);
}

static ngx_int_t
ngx_http_throttle_redis_connect(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_int_t                         rc;
    ngx_connection_t                 *c;
    ngx_http_throttle_redis_worker_t *worker = conn->worker;
    ngx_http_throttle_redis_t        *backend = worker->backend;

    ngx_memzero(&conn->peer, sizeof(ngx_peer_connection_t));
    conn->peer.sockaddr = backend->url.addrs[0].sockaddr;
    conn->peer.socklen = backend->url.addrs[0].socklen;
    conn->peer.name = &backend->url.addrs[0].name;
    conn->peer.get = ngx_event_get_peer;
    conn->peer.log = worker->log;
    /* nginx's own I/O and TLS errors on this connection at info: the
     * limited line from close() says what went wrong */
    conn->peer.log_error = NGX_ERROR_INFO;

    rc = ngx_event_connect_peer(&conn->peer);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (conn->peer.connection) {
            ngx_close_connection(conn->peer.connection);
            conn->peer.connection = NULL;
        }
        ngx_http_throttle_redis_back_off(worker, "connect failed");
        return NGX_ERROR;
    }

    c = conn->peer.connection;
    c->data = conn;
    c->pool = ngx_create_pool(512, worker->log);
    conn->reader = redisReaderCreate();

    if (c->pool == NULL || conn->reader == NULL) {
        conn->state = NGX_HTTP_THROTTLE_REDIS_CONNECTING;
        ngx_http_throttle_redis_close(conn, "out of memory");
        return NGX_ERROR;
    }

    conn->state = NGX_HTTP_THROTTLE_REDIS_CONNECTING;
    c->read->handler = ngx_http_throttle_redis_connect_handler;
    c->write->handler = ngx_http_throttle_redis_connect_handler;

    if (ngx_http_throttle_redis_queue_setup(conn) != NGX_OK) {
        ngx_http_throttle_redis_close(conn, "out of memory");
        return NGX_ERROR;
    }

    if (rc == NGX_AGAIN) {
        ngx_add_timer(c->write, backend->connect_timeout);
        return NGX_OK;
    }

    ngx_http_throttle_redis_connected(conn);
    return NGX_OK;
}

/* Tears a connection down; what was queued on it is the caller's. */
static void
ngx_http_throttle_redis_drop(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_connection_t *c = conn->peer.connection;

    conn->state = NGX_HTTP_THROTTLE_REDIS_CLOSED;

    if (c) {
#if (NGX_SSL)
        if (c->ssl) {
            c->ssl->no_wait_shutdown = 1;
            c->ssl->no_send_shutdown = 1;
            (void) ngx_ssl_shutdown(c);
        }
#endif
        if (c->pool) {
            ngx_destroy_pool(c->pool);
            c->pool = NULL;
        }
        ngx_close_connection(c);
        conn->peer.connection = NULL;
    }

    if (conn->reader) {
        redisReaderFree(conn->reader);
        conn->reader = NULL;
    }

    conn->out_pos = 0;
    conn->out_len = 0;
    conn->appended = 0;
    conn->written = 0;
}

/* A failure: the connection goes, the backend backs off, and every command
 * on the connection fails now. */
static void
ngx_http_throttle_redis_close(ngx_http_throttle_redis_conn_t *conn,
                              const char                     *err) noexcept
{
    ngx_queue_t                       failed, *q;
    ngx_http_throttle_redis_cmd_t    *cmd;
    ngx_http_throttle_redis_worker_t *worker = conn->worker;

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        return;
    }

    for (q = ngx_queue_head(&conn->sent); q != ngx_queue_sentinel(&conn->sent);
         q = ngx_queue_next(q))
    {
        cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);
        cmd->sent = conn->written >= cmd->end;
    }

    /* the connection is gone before anyone hears of it: a request resumed
     * below that asks for Redis again finds the backend backing off */
    ngx_http_throttle_redis_drop(conn);
    ngx_http_throttle_redis_back_off(worker, err);

    ngx_queue_init(&failed);
    if (!ngx_queue_empty(&conn->sent)) {
        ngx_queue_add(&failed, &conn->sent);
        ngx_queue_init(&conn->sent);
    }

    while (!ngx_queue_empty(&failed)) {
        q = ngx_queue_head(&failed);
        ngx_queue_remove(q);
        cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);

        if (cmd->done) {
            cmd->done(cmd->data, NULL, err, cmd->sent);
        }

        ngx_free(cmd);
    }
}

static void
ngx_http_throttle_redis_write_handler(ngx_event_t *ev) noexcept
{
    ssize_t                         n;
    ngx_connection_t               *c = (ngx_connection_t *) ev->data;
    ngx_http_throttle_redis_conn_t *conn;

    conn = (ngx_http_throttle_redis_conn_t *) c->data;

    while (conn->out_pos < conn->out_len) {
        n = c->send(c, conn->out + conn->out_pos,
                    conn->out_len - conn->out_pos);

        if (n == NGX_AGAIN) {
            if (ngx_handle_write_event(c->write, 0) != NGX_OK) {
                ngx_http_throttle_redis_close(conn, "cannot write");
            }
            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_throttle_redis_close(conn, "send failed");
            return;
        }

        conn->out_pos += n;
        conn->written += n;
    }

    conn->out_pos = 0;
    conn->out_len = 0;
}

/* Hands a reply to its command; false if the connection must go. */
static bool
ngx_http_throttle_redis_dispatch(ngx_http_throttle_redis_conn_t *conn,
                                 redisReply                     *reply) noexcept
{
    char                           err[256];
    ngx_queue_t                   *q;
    ngx_http_throttle_redis_cmd_t *cmd;

    if (ngx_queue_empty(&conn->sent)) {
        ngx_http_throttle_redis_close(conn, "reply to no command");
        return false;
    }

    q = ngx_queue_head(&conn->sent);
    cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);

    if (cmd->what) {
        /* AUTH or SELECT: an error leaves the connection useless */
        if (reply->type == REDIS_REPLY_ERROR) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1, "%s failed: %*s%Z",
                         cmd->what, (size_t) ngx_min(reply->len, 200),
                         reply->str);
            ngx_http_throttle_redis_close(conn, err);
            return false;
        }

        ngx_queue_remove(q);
        ngx_free(cmd);
        return true;
    }

    ngx_queue_remove(q);

    if (reply->type == REDIS_REPLY_ERROR && !cmd->sent_source
        && ngx_strncmp(reply->str, "NOSCRIPT", 8) == 0)
    {
        /* Redis restarted or SCRIPT FLUSH: EVAL puts the script back */
        cmd->sent_source = 1;
        cmd->deadline = ngx_current_msec + cmd->timeout;

        if (ngx_http_throttle_redis_append_eval(conn, cmd) == NGX_OK) {
            cmd->end = conn->appended;
            ngx_queue_insert_tail(&conn->sent, &cmd->queue);
            ngx_http_throttle_redis_flush(conn);
            return true;
        }
    }

    conn->worker->failures = 0;

    if (cmd->done) {
        cmd->done(cmd->data, reply, NULL, true);
    }

    ngx_free(cmd);
    return conn->state != NGX_HTTP_THROTTLE_REDIS_CLOSED;
}

static void
ngx_http_throttle_redis_read_handler(ngx_event_t *ev) noexcept
{
    ssize_t                         n;
    void                           *reply;
    bool                            alive;
    ngx_connection_t               *c = (ngx_connection_t *) ev->data;
    ngx_http_throttle_redis_conn_t *conn;
    u_char                          buf[NGX_HTTP_THROTTLE_REDIS_READ_SIZE];
    char                            err[160];

    conn = (ngx_http_throttle_redis_conn_t *) c->data;

    if (ev->timedout) {
        ngx_snprintf((u_char *) err, sizeof(err) - 1, "no reply within %M ms%Z",
                     conn->worker->backend->timeout);
        ngx_http_throttle_redis_close(conn, err);
        return;
    }

    for (;;) {
        n = c->recv(c, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == 0 && ngx_queue_empty(&conn->sent)) {
            /* an idle connection closed by Redis (restart, client
             * timeout): no failure, the next command connects again */
            ngx_http_throttle_redis_drop(conn);
            return;
        }

        if (n == 0 || n == NGX_ERROR) {
            ngx_http_throttle_redis_close(conn,
                                          n == 0 ? "connection closed "
                                                   "by Redis"
                                                 : "recv failed");
            return;
        }

        if (redisReaderFeed(conn->reader, (const char *) buf, n) != REDIS_OK) {
            ngx_http_throttle_redis_close(conn, "out of memory");
            return;
        }

        for (;;) {
            reply = NULL;

            if (redisReaderGetReply(conn->reader, &reply) != REDIS_OK) {
                ngx_snprintf((u_char *) err, sizeof(err) - 1,
                             "protocol error: %s%Z", conn->reader->errstr);
                ngx_http_throttle_redis_close(conn, err);
                return;
            }

            if (reply == NULL) {
                break;
            }

            alive =
                ngx_http_throttle_redis_dispatch(conn, (redisReply *) reply);
            freeReplyObject(reply);

            if (!alive) {
                return;
            }
        }
    }

    ngx_http_throttle_redis_arm_timer(conn);

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_throttle_redis_close(conn, "cannot watch the connection");
    }
}

ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_eval(ngx_http_throttle_redis_t            *backend,
                             const ngx_http_throttle_redis_call_t *call,
                             ngx_http_throttle_redis_done_pt       done,
                             void *data) noexcept
{
    ngx_http_throttle_redis_cmd_t    *cmd;
    ngx_http_throttle_redis_conn_t   *conn;
    ngx_http_throttle_redis_worker_t *worker = backend->worker;

    if (worker == NULL || call->nkeys == 0) {
        return NULL;
    }

    conn = &worker->conns[worker->next++ % backend->keepalive];

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        if ((ngx_msec_int_t) (worker->retry_at - ngx_current_msec) > 0) {
            return NULL; /* backing off: answer now, not in "timeout" */
        }

        if (ngx_http_throttle_redis_connect(conn) != NGX_OK
            || conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED)
        {
            return NULL;
        }
    }

    cmd = ngx_http_throttle_redis_cmd(worker, call);
    if (cmd == NULL) {
        return NULL;
    }

    cmd->done = done;
    cmd->data = data;

    if (ngx_http_throttle_redis_append_eval(conn, cmd) != NGX_OK) {
        ngx_free(cmd);
        return NULL;
    }

    cmd->end = conn->appended;
    ngx_queue_insert_tail(&conn->sent, &cmd->queue);

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_READY) {
        ngx_http_throttle_redis_arm_timer(conn);
        ngx_http_throttle_redis_flush(conn);

    } else if (!conn->peer.connection->read->timer_set) {
        ngx_http_throttle_redis_arm_timer(conn);
    }

    return cmd;
}

bool
ngx_http_throttle_redis_backing_off(ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_http_throttle_redis_worker_t *worker = backend->worker;

    return worker == NULL
        || (ngx_msec_int_t) (worker->retry_at - ngx_current_msec) > 0;
}

void
ngx_http_throttle_redis_detach(ngx_http_throttle_redis_cmd_t *cmd) noexcept
{
    cmd->done = NULL;
    cmd->data = NULL;
}

ngx_int_t
ngx_http_throttle_redis_init_worker(ngx_cycle_t               *cycle,
                                    ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_uint_t                        i;
    ngx_http_throttle_redis_worker_t *worker;

    worker = (ngx_http_throttle_redis_worker_t *) ngx_pcalloc(
        cycle->pool, sizeof(ngx_http_throttle_redis_worker_t));
    if (worker == NULL) {
        return NGX_ERROR;
    }

    worker->conns = (ngx_http_throttle_redis_conn_t *) ngx_pcalloc(
        cycle->pool,
        backend->keepalive * sizeof(ngx_http_throttle_redis_conn_t));
    if (worker->conns == NULL) {
        return NGX_ERROR;
    }

    worker->backend = backend;
    worker->log = cycle->log;

    for (i = 0; i < backend->keepalive; i++) {
        worker->conns[i].worker = worker;
        ngx_queue_init(&worker->conns[i].sent);
    }

    backend->worker = worker;
    return NGX_OK;
}

void
ngx_http_throttle_redis_exit_worker(ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_uint_t                        i;
    ngx_http_throttle_redis_worker_t *worker = backend->worker;

    if (worker == NULL) {
        return;
    }

    /* exiting is not worth a line: as if one had just gone out, the
     * closes below are held back */
    worker->error_log.last = ngx_current_msec;

    for (i = 0; i < backend->keepalive; i++) {
        ngx_http_throttle_redis_close(&worker->conns[i], "worker exiting");
        ngx_free(worker->conns[i].out);
        worker->conns[i].out = NULL;
    }

    backend->worker = NULL;
}
