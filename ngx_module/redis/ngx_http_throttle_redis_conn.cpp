/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One Redis connection's life, on nginx's event loop: it connects
 * (ngx_event_connect_peer, within "connect_timeout"), goes through TLS if
 * asked, then writes what its commands queued and reads their replies
 * with hiredis's redisReader (throttle::open_reply_reader(), which bounds
 * the arrays a reply may announce). The read timer is the oldest command's
 * deadline. A failure closes it and fails every command on it; an idle
 * connection Redis closes just goes, and the next command connects again.
 */

#include "ngx_http_throttle_redis_conn.h"
#include "ngx_http_throttle_redis_node.h"
#include "ngx_http_throttle_redis_tls.h"

#include "throttle/redis.hpp"

#define NGX_HTTP_THROTTLE_REDIS_READ_SIZE 16384

static void ngx_http_throttle_redis_connect_handler(ngx_event_t *ev) noexcept;
static void ngx_http_throttle_redis_connected(
    ngx_http_throttle_redis_conn_t *conn) noexcept;
static void
ngx_http_throttle_redis_ready(ngx_http_throttle_redis_conn_t *conn) noexcept;
static void ngx_http_throttle_redis_write_handler(ngx_event_t *ev) noexcept;
static void ngx_http_throttle_redis_read_handler(ngx_event_t *ev) noexcept;
static bool
ngx_http_throttle_redis_read_replies(ngx_http_throttle_redis_conn_t *conn,
                                     u_char *buf, size_t size) noexcept;
static void
ngx_http_throttle_redis_close(ngx_http_throttle_redis_conn_t *conn) noexcept;

/* The oldest command's deadline has passed: the connection fails. (The
 * timer may fire early: ngx_add_timer() leaves a timer within 300 ms,
 * NGX_TIMER_LAZY_DELAY, of the time asked where it was.) */
static void
ngx_http_throttle_redis_timed_out(ngx_event_t *ev) noexcept
{
    ngx_http_throttle_redis_conn_t *conn;
    char                            err[160];

    conn = (ngx_http_throttle_redis_conn_t *) ev->data;

    if (!ngx_http_throttle_redis_arm_timer(conn)) {
        return;
    }

    ngx_snprintf((u_char *) err, sizeof(err) - 1, "no reply within %M ms%Z",
                 conn->node->worker->backend->timeout);
    ngx_http_throttle_redis_fail_as(conn, NGX_HTTP_THROTTLE_REDIS_ERR_TIMEOUT,
                                    err);
}

/* A new connection, with its setup commands (AUTH, SELECT, ROLE) queued
 * first; the commands sent meanwhile queue behind them. A master the
 * sentinels name is asked for first, on every reconnect. NGX_ERROR if out
 * of memory. */
ngx_int_t
ngx_http_throttle_redis_open(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_http_throttle_redis_node_t *node = conn->node;

    conn->timer.handler = ngx_http_throttle_redis_timed_out;
    conn->timer.data = conn;
    conn->timer.log = node->worker->log;
    conn->reader = throttle::open_reply_reader();
    conn->state = NGX_HTTP_THROTTLE_REDIS_CONNECTING;

    if (conn->reader == NULL || node->worker->events->setup(conn) != NGX_OK) {
        ngx_http_throttle_redis_fail(conn, "out of memory");
        return NGX_ERROR;
    }

    if (node->worker->backend->topology == NGX_HTTP_THROTTLE_REDIS_SENTINEL
        && !node->sentinel)
    {
        node->worker->events->resolve(conn);
        return NGX_OK;
    }

    ngx_http_throttle_redis_connect(conn);
    return NGX_OK;
}

/* Connects to the node's address; a failure fails the connection (and
 * what was queued on it). */
void
ngx_http_throttle_redis_connect(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_int_t                       rc;
    ngx_connection_t               *c;
    ngx_http_throttle_redis_node_t *node = conn->node;

    conn->state = NGX_HTTP_THROTTLE_REDIS_CONNECTING;

    ngx_memzero(&conn->peer, sizeof(ngx_peer_connection_t));
    conn->peer.sockaddr = &node->sockaddr.sockaddr;
    conn->peer.socklen = node->socklen;
    conn->peer.name = &node->name;
    conn->peer.get = ngx_event_get_peer;
    conn->peer.log = node->worker->log;
    /* nginx's own I/O and TLS errors on this connection at info: the
     * limited line from fail() says what went wrong */
    conn->peer.log_error = NGX_ERROR_INFO;

    rc = ngx_event_connect_peer(&conn->peer);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (conn->peer.connection) {
            ngx_close_connection(conn->peer.connection);
            conn->peer.connection = NULL;
        }
        ngx_http_throttle_redis_fail_as(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_CONNECT, "connect failed");
        return;
    }

    c = conn->peer.connection;
    c->data = conn;
    ngx_http_throttle_redis_count_connection(node->worker->backend->metrics, 1);
    c->pool = ngx_create_pool(512, node->worker->log);

    if (c->pool == NULL) {
        ngx_http_throttle_redis_fail(conn, "out of memory");
        return;
    }

    c->read->handler = ngx_http_throttle_redis_connect_handler;
    c->write->handler = ngx_http_throttle_redis_connect_handler;

    if (rc == NGX_AGAIN) {
        ngx_add_timer(c->write, node->worker->backend->connect_timeout);
        return;
    }

    ngx_http_throttle_redis_connected(conn);
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
        ngx_http_throttle_redis_fail_as(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_TIMEOUT, "timed out connecting");
        return;
    }

    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len) == -1) {
        err = ngx_socket_errno;
    }

    if (err) {
        ngx_http_throttle_redis_fail_as(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_CONNECT, strerror(err));
        return;
    }

    ngx_http_throttle_redis_connected(conn);
}

#if (NGX_SSL)

/* The handshake's end: the certificate is checked before any command. */
static void
ngx_http_throttle_redis_handshaked(ngx_connection_t *c) noexcept
{
    const char                     *failed;
    ngx_http_throttle_redis_conn_t *conn;
    char                            err[256];

    conn = (ngx_http_throttle_redis_conn_t *) c->data;
    failed = ngx_http_throttle_redis_check_tls(conn, err, sizeof(err));

    if (failed) {
        /* through fail(), whose log line is limited to one a second: a bad
         * certificate fails every reconnect */
        ngx_http_throttle_redis_fail_as(conn, NGX_HTTP_THROTTLE_REDIS_ERR_TLS,
                                        failed);
        return;
    }

    ngx_http_throttle_redis_ready(conn);
}

#endif

static void
ngx_http_throttle_redis_connected(ngx_http_throttle_redis_conn_t *conn) noexcept
{
#if (NGX_SSL)
    ngx_connection_t *c = conn->peer.connection;

    if (conn->node->worker->backend->tls) {
        switch (ngx_http_throttle_redis_start_tls(conn)) {

        case NGX_AGAIN:
            if (!c->write->timer_set) {
                ngx_add_timer(c->write,
                              conn->node->worker->backend->connect_timeout);
            }
            c->ssl->handler = ngx_http_throttle_redis_handshaked;
            return;

        case NGX_OK:
            ngx_http_throttle_redis_handshaked(c);
            return;

        default:
            ngx_http_throttle_redis_fail_as(
                conn, NGX_HTTP_THROTTLE_REDIS_ERR_TLS, "TLS setup failed");
            return;
        }
    }
#endif

    ngx_http_throttle_redis_ready(conn);
}

/* Connected (and through TLS): what was queued meanwhile goes out. */
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
        ngx_http_throttle_redis_fail(conn, "cannot watch the connection");
    }
}

/* The timer: the oldest command's deadline, none when none waits. True
 * if that deadline has passed (the timer then fires at once). */
bool
ngx_http_throttle_redis_arm_timer(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_event_t                   *rev = &conn->timer;
    ngx_http_throttle_redis_cmd_t *head;
    ngx_msec_int_t                 left;

    if (ngx_queue_empty(&conn->awaiting)) {
        if (rev->timer_set) {
            ngx_del_timer(rev);
        }
        return false;
    }

    head = ngx_queue_data(ngx_queue_head(&conn->awaiting),
                          ngx_http_throttle_redis_cmd_t, queue);
    left = (ngx_msec_int_t) (head->deadline - ngx_current_msec);

    ngx_add_timer(rev, left > 0 ? (ngx_msec_t) left : 1);
    return left <= 0;
}

void
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
                ngx_http_throttle_redis_fail(conn, "cannot write");
            }
            return;
        }

        if (n == NGX_ERROR) {
            ngx_http_throttle_redis_fail_as(
                conn, NGX_HTTP_THROTTLE_REDIS_ERR_CONNECT, "send failed");
            return;
        }

        conn->out_pos += n;
        conn->written += n;
        conn->node->worker->events->written(conn, conn->written - n);
    }

    conn->out_pos = 0;
    conn->out_len = 0;
}

static void
ngx_http_throttle_redis_read_handler(ngx_event_t *ev) noexcept
{
    ssize_t                         n;
    ngx_connection_t               *c = (ngx_connection_t *) ev->data;
    ngx_http_throttle_redis_conn_t *conn;
    u_char                          buf[NGX_HTTP_THROTTLE_REDIS_READ_SIZE];

    conn = (ngx_http_throttle_redis_conn_t *) c->data;

    for (;;) {
        n = c->recv(c, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            break;
        }

        if (n == 0 && ngx_queue_empty(&conn->awaiting)) {
            /* an idle connection closed by Redis (restart, client
             * timeout): no failure, the next command connects again */
            ngx_http_throttle_redis_close(conn);
            return;
        }

        if (n == 0 || n == NGX_ERROR) {
            ngx_http_throttle_redis_fail_as(conn,
                                            NGX_HTTP_THROTTLE_REDIS_ERR_CONNECT,
                                            n == 0 ? "connection closed "
                                                     "by Redis"
                                                   : "recv failed");
            return;
        }

        if (!ngx_http_throttle_redis_read_replies(conn, buf, n)) {
            return;
        }
    }

    ngx_http_throttle_redis_arm_timer(conn);

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_throttle_redis_fail(conn, "cannot watch the connection");
    }
}

/* Feeds what was read to the RESP reader and hands every reply it
 * completes to its command; false if the connection is gone. */
static bool
ngx_http_throttle_redis_read_replies(ngx_http_throttle_redis_conn_t *conn,
                                     u_char *buf, size_t size) noexcept
{
    void *reply;
    bool  alive;
    char  err[160];

    if (redisReaderFeed(conn->reader, (const char *) buf, size) != REDIS_OK) {
        ngx_http_throttle_redis_fail(conn, "out of memory");
        return false;
    }

    for (;;) {
        reply = NULL;

        if (redisReaderGetReply(conn->reader, &reply) != REDIS_OK) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1,
                         "protocol error: %s%Z",
                         throttle::reply_reader_error(conn->reader));
            ngx_http_throttle_redis_fail_as(
                conn, NGX_HTTP_THROTTLE_REDIS_ERR_REPLY, err);
            return false;
        }

        if (reply == NULL) {
            return true;
        }

        alive = conn->node->worker->events->reply(conn, (redisReply *) reply);
        freeReplyObject(reply);

        if (!alive) {
            return false;
        }
    }
}

/* Tears a connection down; what was queued on it is the caller's. */
static void
ngx_http_throttle_redis_close(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_connection_t *c = conn->peer.connection;

    conn->state = NGX_HTTP_THROTTLE_REDIS_CLOSED;

    if (conn->timer.timer_set) {
        ngx_del_timer(&conn->timer);
    }

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
        ngx_http_throttle_redis_count_connection(
            conn->node->worker->backend->metrics, -1);
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

/* The connection goes, and every command on it fails now; a failure
 * ("back_off") makes its node wait before the next connect. */
static void
ngx_http_throttle_redis_end(ngx_http_throttle_redis_conn_t *conn,
                            const char *err, bool back_off) noexcept
{
    ngx_queue_t                    failed, *q;
    ngx_http_throttle_redis_cmd_t *cmd;

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        return;
    }

    for (q = ngx_queue_head(&conn->awaiting);
         q != ngx_queue_sentinel(&conn->awaiting); q = ngx_queue_next(q))
    {
        cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);
        cmd->sent = conn->written >= cmd->end;
    }

    /* the connection is gone before anyone hears of it: a request resumed
     * below that asks for Redis again finds the node backing off */
    ngx_http_throttle_redis_close(conn);

    if (back_off) {
        ngx_http_throttle_redis_back_off(conn->node, err);
    }

    ngx_queue_init(&failed);
    if (!ngx_queue_empty(&conn->awaiting)) {
        ngx_queue_add(&failed, &conn->awaiting);
        ngx_queue_init(&conn->awaiting);
    }

    while (!ngx_queue_empty(&failed)) {
        q = ngx_queue_head(&failed);
        ngx_queue_remove(q);
        cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);
        ngx_http_throttle_redis_finish(cmd, NULL, err, cmd->sent);
    }
}

void
ngx_http_throttle_redis_fail(ngx_http_throttle_redis_conn_t *conn,
                             const char                     *err) noexcept
{
    ngx_http_throttle_redis_end(conn, err, true);
}

/* A failure, counted as "kind" for throttle_metrics. */
void
ngx_http_throttle_redis_fail_as(ngx_http_throttle_redis_conn_t *conn,
                                ngx_http_throttle_redis_error_e kind,
                                const char                     *err) noexcept
{
    ngx_http_throttle_redis_conn_error(conn, kind);
    ngx_http_throttle_redis_end(conn, err, true);
}

/* Not a failure of the server: the connection is no longer wanted. */
void
ngx_http_throttle_redis_drop(ngx_http_throttle_redis_conn_t *conn,
                             const char                     *err) noexcept
{
    ngx_http_throttle_redis_end(conn, err, false);
}

/* A connection of the node to send on, connecting it if need be; NULL
 * while the node backs off, or if it cannot connect. */
ngx_http_throttle_redis_conn_t *
ngx_http_throttle_redis_pick(ngx_http_throttle_redis_node_t *node) noexcept
{
    ngx_http_throttle_redis_conn_t *conn;

    conn = &node->conns[node->next++ % node->nconns];

    if (conn->state != NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        return conn;
    }

    if (ngx_http_throttle_redis_node_backing_off(node)) {
        return NULL; /* answer now, not in "timeout" */
    }

    if (ngx_http_throttle_redis_open(conn) != NGX_OK
        || conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED)
    {
        return NULL;
    }

    return conn;
}

/* Every connection to the node fails: its commands with them. */
void
ngx_http_throttle_redis_fail_node(ngx_http_throttle_redis_node_t *node,
                                  const char                     *err) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < node->nconns; i++) {
        ngx_http_throttle_redis_fail(&node->conns[i], err);
    }
}
