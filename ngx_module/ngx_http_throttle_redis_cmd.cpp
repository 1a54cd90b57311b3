/*
 * The commands on a Redis connection: each is written in RESP (by hiredis)
 * at the end of the connection's output and queued for its reply; replies
 * come in the order the commands were written, so the oldest command takes
 * each. AUTH and SELECT go first on a new connection; a script Redis has
 * lost (NOSCRIPT) is sent again with its source.
 */

#include "ngx_http_throttle_redis_conn.h"

#include <new>

/* A command, with a copy of its arguments (to send it again as EVAL):
 * the keys as they are, the integers in decimal. A setup command (no
 * "call") keeps none. */
static ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_create_cmd(
    ngx_http_throttle_redis_worker_t     *worker,
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

/* Writes "cmd" as argv at the end of the connection's output and queues
 * it for its reply. */
static ngx_int_t
ngx_http_throttle_redis_append(ngx_http_throttle_redis_conn_t *conn,
                               ngx_http_throttle_redis_cmd_t *cmd, int argc,
                               const char  **argv,
                               const size_t *argvlen) noexcept
{
    char   *resp;
    int     len;
    size_t  size;
    u_char *out;

    len = redisFormatCommandArgv(&resp, argc, argv, argvlen);
    if (len < 0) {
        return NGX_ERROR;
    }

    if (conn->out_len + len > conn->out_size) {
        size = ngx_max(conn->out_size * 2, conn->out_len + len);
        out = (u_char *) ngx_alloc(size, conn->worker->log);
        if (out == NULL) {
            redisFreeCommand(resp);
            return NGX_ERROR;
        }

        /* memcpy's pointers must not be NULL even for no bytes, and the
         * first growth has no buffer yet */
        if (conn->out_len > conn->out_pos) {
            ngx_memcpy(out, conn->out + conn->out_pos,
                       conn->out_len - conn->out_pos);
        }

        ngx_free(conn->out);

        conn->out = out;
        conn->out_len -= conn->out_pos;
        conn->out_pos = 0;
        conn->out_size = size;
    }

    ngx_memcpy(conn->out + conn->out_len, resp, len);
    conn->out_len += len;
    conn->appended += len;
    redisFreeCommand(resp);

    cmd->end = conn->appended;
    ngx_queue_insert_tail(&conn->awaiting, &cmd->queue);

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

    rc = ngx_http_throttle_redis_append(conn, cmd, (int) argc, argv, argvlen);

    if (argv != argv_small) {
        ngx_free(argv);
        ngx_free(argvlen);
    }

    return rc;
}

static ngx_int_t
ngx_http_throttle_redis_append_setup(ngx_http_throttle_redis_conn_t *conn,
                                     const char *setup, int argc,
                                     const char  **argv,
                                     const size_t *argvlen) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;

    cmd = ngx_http_throttle_redis_create_cmd(conn->worker, NULL);
    if (cmd == NULL) {
        return NGX_ERROR;
    }

    cmd->setup = setup;

    if (ngx_http_throttle_redis_append(conn, cmd, argc, argv, argvlen)
        != NGX_OK) {
        ngx_free(cmd);
        return NGX_ERROR;
    }

    return NGX_OK;
}

/* AUTH and SELECT go first on a new connection, pipelined with whatever
 * the requests queue behind them. */
ngx_int_t
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

        if (ngx_http_throttle_redis_append_setup(conn, "AUTH", argc, argv,
                                                 argvlen)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (backend->database > 0) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", backend->database) - db;

        if (ngx_http_throttle_redis_append_setup(conn, "SELECT", 2, argv,
                                                 argvlen)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

/* A script call on a connection that is ready or still connecting (then
 * it is written once the connection is ready); NULL if out of memory. */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_conn_eval(ngx_http_throttle_redis_conn_t       *conn,
                                  const ngx_http_throttle_redis_call_t *call,
                                  ngx_http_throttle_redis_done_pt       done,
                                  void *data) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;

    cmd = ngx_http_throttle_redis_create_cmd(conn->worker, call);
    if (cmd == NULL) {
        return NULL;
    }

    cmd->done = done;
    cmd->data = data;

    if (ngx_http_throttle_redis_append_eval(conn, cmd) != NGX_OK) {
        ngx_free(cmd);
        return NULL;
    }

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_READY) {
        ngx_http_throttle_redis_arm_timer(conn);
        ngx_http_throttle_redis_flush(conn);

    } else if (!conn->peer.connection->read->timer_set) {
        /* connecting: the timer, once set, runs for an older command */
        ngx_http_throttle_redis_arm_timer(conn);
    }

    return cmd;
}

/* Hands a reply to the oldest command; false if the connection is gone. */
bool
ngx_http_throttle_redis_dispatch(ngx_http_throttle_redis_conn_t *conn,
                                 redisReply                     *reply) noexcept
{
    char                           err[256];
    ngx_queue_t                   *q;
    ngx_http_throttle_redis_cmd_t *cmd;

    if (ngx_queue_empty(&conn->awaiting)) {
        ngx_http_throttle_redis_fail(conn, "reply to no command");
        return false;
    }

    q = ngx_queue_head(&conn->awaiting);
    cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);

    if (cmd->setup) {
        /* AUTH or SELECT: an error leaves the connection useless */
        if (reply->type == REDIS_REPLY_ERROR) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1, "%s failed: %*s%Z",
                         cmd->setup, (size_t) ngx_min(reply->len, 200),
                         reply->str);
            ngx_http_throttle_redis_fail(conn, err);
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
