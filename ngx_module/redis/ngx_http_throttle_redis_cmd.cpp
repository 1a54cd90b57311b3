/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The commands on a Redis connection: each is written in RESP (by hiredis)
 * at the end of the connection's output and queued for its reply; replies
 * come in the order the commands were written, so the oldest command takes
 * each. AUTH and SELECT go first on a new connection; a script Redis has
 * lost (NOSCRIPT) is sent again with its source.
 */

#include "ngx_http_throttle_redis_cmd.h"
#include "ngx_http_throttle_redis_conn.h"

#include "ngx_http_throttle_params.h"

#include "throttle/clock.hpp"
#include "throttle/cluster.hpp"

#include <new>

/* A command, with a copy of its arguments (to send it again as EVAL, or
 * elsewhere): the keys as they are, the integers in decimal. Another
 * command (no "call") keeps none. */
ngx_http_throttle_redis_cmd_t *
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
        out = (u_char *) ngx_alloc(size, conn->node->worker->log);
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
        argv = (const char **) ngx_alloc(argc * sizeof(char *),
                                         conn->node->worker->log);
        argvlen = (size_t *) ngx_alloc(argc * sizeof(size_t),
                                       conn->node->worker->log);
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

/*
 * The bytes from "from" to conn->written have gone out: each script they
 * complete is sent, and its round trip starts now. A script counts when
 * written, not when queued, so that one queued on a connection that never
 * opens is not counted. Commands are queued in the order of their bytes:
 * those not yet written whole are the queue's last.
 */
void
ngx_http_throttle_redis_count_written(ngx_http_throttle_redis_conn_t *conn,
                                      uint64_t from) noexcept
{
    int64_t                        now = 0;
    ngx_queue_t                   *q;
    ngx_http_throttle_redis_cmd_t *cmd;

    for (q = ngx_queue_last(&conn->awaiting);
         q != ngx_queue_sentinel(&conn->awaiting); q = ngx_queue_prev(q))
    {
        cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);

        if (cmd->end <= from) {
            break;
        }

        if (cmd->end > conn->written
            || cmd->kind != NGX_HTTP_THROTTLE_REDIS_SCRIPT) {
            continue;
        }

        if (now == 0) {
            now = throttle::monotonic_now_us();
        }

        cmd->written_us = now;
        ngx_http_throttle_redis_count_command(
            conn->node->worker->backend->metrics);
    }
}

/* A command that is not a script, written now; NULL if out of memory. */
static ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_append_command(ngx_http_throttle_redis_conn_t *conn,
                                       ngx_uint_t kind, int argc,
                                       const char  **argv,
                                       const size_t *argvlen) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;

    cmd = ngx_http_throttle_redis_create_cmd(conn->node->worker, NULL);
    if (cmd == NULL) {
        return NULL;
    }

    cmd->kind = kind;

    if (ngx_http_throttle_redis_append(conn, cmd, argc, argv, argvlen)
        != NGX_OK) {
        ngx_free(cmd);
        return NULL;
    }

    return cmd;
}

static ngx_int_t
ngx_http_throttle_redis_append_auth(ngx_http_throttle_redis_conn_t *conn,
                                    ngx_str_t                      *username,
                                    ngx_str_t *password) noexcept
{
    const char *argv[3];
    size_t      argvlen[3];
    int         argc = 0;

    if (password->len == 0) {
        return NGX_OK;
    }

    argv[argc] = "AUTH";
    argvlen[argc++] = 4;

    if (username->len) {
        argv[argc] = (const char *) username->data;
        argvlen[argc++] = username->len;
    }

    argv[argc] = (const char *) password->data;
    argvlen[argc++] = password->len;

    return ngx_http_throttle_redis_append_command(
               conn, NGX_HTTP_THROTTLE_REDIS_AUTH, argc, argv, argvlen)
        ? NGX_OK
        : NGX_ERROR;
}

/* AUTH and SELECT go first on a new connection, pipelined with whatever
 * the requests queue behind them, and to a master the sentinels named,
 * ROLE, to be sure it still is one. A sentinel gets its own AUTH only. */
ngx_int_t
ngx_http_throttle_redis_queue_setup(
    ngx_http_throttle_redis_conn_t *conn) noexcept
{
    ngx_http_throttle_redis_t *backend = conn->node->worker->backend;
    const char                *argv[2];
    size_t                     argvlen[2];
    u_char                     db[NGX_INT_T_LEN];

    if (conn->node->sentinel) {
        return ngx_http_throttle_redis_append_auth(
            conn, &backend->sentinel_username, &backend->sentinel_password);
    }

    if (ngx_http_throttle_redis_append_auth(conn, &backend->username,
                                            &backend->password)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (backend->database > 0) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", backend->database) - db;

        if (ngx_http_throttle_redis_append_command(
                conn, NGX_HTTP_THROTTLE_REDIS_SELECT, 2, argv, argvlen)
            == NULL)
        {
            return NGX_ERROR;
        }
    }

    if (backend->topology != NGX_HTTP_THROTTLE_REDIS_SENTINEL) {
        return NGX_OK;
    }

    argv[0] = "ROLE";
    argvlen[0] = 4;

    return ngx_http_throttle_redis_append_command(
               conn, NGX_HTTP_THROTTLE_REDIS_ROLE, 1, argv, argvlen)
        ? NGX_OK
        : NGX_ERROR;
}

/* What was just queued goes out: at once if the connection is ready, or
 * once it is; the timer runs for the oldest command. */
static void
ngx_http_throttle_redis_queued(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    if (conn->state == NGX_HTTP_THROTTLE_REDIS_READY) {
        ngx_http_throttle_redis_arm_timer(conn);
        ngx_http_throttle_redis_flush(conn);

    } else if (!conn->timer.timer_set) {
        /* connecting: the timer, once set, runs for an older command */
        ngx_http_throttle_redis_arm_timer(conn);
    }
}

/* A script call on a connection that is ready or on its way (then it is
 * written once the connection is ready), after ASKING if "asking". */
ngx_int_t
ngx_http_throttle_redis_conn_send(ngx_http_throttle_redis_conn_t *conn,
                                  ngx_http_throttle_redis_cmd_t  *cmd,
                                  bool asking) noexcept
{
    const char *argv[1] = {"ASKING"};
    size_t      argvlen[1] = {6};

    if (asking
        && ngx_http_throttle_redis_append_command(
               conn, NGX_HTTP_THROTTLE_REDIS_ASKING, 1, argv, argvlen)
            == NULL)
    {
        return NGX_ERROR;
    }

    if (ngx_http_throttle_redis_append_eval(conn, cmd) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_throttle_redis_queued(conn);
    return NGX_OK;
}

/* Sends a command to a node (after ASKING if "asking"); false if the node
 * cannot take it now: the command is still the caller's. */
bool
ngx_http_throttle_redis_send(ngx_http_throttle_redis_node_t *node,
                             ngx_http_throttle_redis_cmd_t  *cmd,
                             bool                            asking) noexcept
{
    ngx_http_throttle_redis_conn_t *conn;

    conn = ngx_http_throttle_redis_pick(node);

    return conn
        && ngx_http_throttle_redis_conn_send(conn, cmd, asking) == NGX_OK;
}

/* A command that is not a script (CLUSTER SLOTS, SENTINEL ...), its reply
 * to "done" within "timeout"; NULL if out of memory. */
ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_conn_query(ngx_http_throttle_redis_conn_t *conn,
                                   int argc, const char **argv,
                                   const size_t *argvlen, ngx_msec_t timeout,
                                   ngx_http_throttle_redis_done_pt done,
                                   void *data) noexcept
{
    ngx_http_throttle_redis_cmd_t *cmd;

    cmd = ngx_http_throttle_redis_append_command(
        conn, NGX_HTTP_THROTTLE_REDIS_QUERY, argc, argv, argvlen);
    if (cmd == NULL) {
        return NULL;
    }

    cmd->done = done;
    cmd->data = data;
    cmd->timeout = timeout;
    cmd->deadline = ngx_current_msec + timeout;

    ngx_http_throttle_redis_queued(conn);
    return cmd;
}

/* A setup command's reply: AUTH, SELECT and ROLE must succeed or the
 * connection is useless; ASKING's does not matter. False if the
 * connection is gone. */
static bool
ngx_http_throttle_redis_setup_done(ngx_http_throttle_redis_conn_t *conn,
                                   ngx_http_throttle_redis_cmd_t  *cmd,
                                   redisReply *reply) noexcept
{
    static const char *names[] = {"", "", "AUTH", "SELECT", "ROLE", "ASKING"};
    char               err[256];

    if (cmd->kind == NGX_HTTP_THROTTLE_REDIS_ROLE
        && reply->type != REDIS_REPLY_ERROR && !throttle::role_is_master(reply))
    {
        ngx_http_throttle_redis_fail_as(conn,
                                        NGX_HTTP_THROTTLE_REDIS_ERR_FAILOVER,
                                        "not a master (a failover?): "
                                        "asking the sentinels again");
        return false;
    }

    if (reply->type == REDIS_REPLY_ERROR
        && cmd->kind != NGX_HTTP_THROTTLE_REDIS_ASKING)
    {
        ngx_snprintf((u_char *) err, sizeof(err) - 1, "%s failed: %*s%Z",
                     names[cmd->kind], (size_t) ngx_min(reply->len, 200),
                     reply->str);
        ngx_http_throttle_redis_fail_as(conn, NGX_HTTP_THROTTLE_REDIS_ERR_AUTH,
                                        err);
        return false;
    }

    ngx_queue_remove(&cmd->queue);
    ngx_free(cmd);
    return true;
}

/* An error reply to a script: Redis lost it (NOSCRIPT: EVAL puts it
 * back), or the Cluster or the sentinels' master sends it elsewhere.
 * True if the command was taken care of. */
static bool
ngx_http_throttle_redis_steer(ngx_http_throttle_redis_conn_t *conn,
                              ngx_http_throttle_redis_cmd_t  *cmd,
                              redisReply                     *reply) noexcept
{
    if (!cmd->sent_source
        && throttle::read_error({reply->str, (size_t) reply->len},
                                ngx_http_throttle_sv(conn->node->address))
                .kind
            == throttle::ErrorKind::noscript)
    {
        ngx_http_throttle_redis_conn_error(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_NOSCRIPT);
        cmd->sent_source = 1;
        cmd->deadline = ngx_current_msec + cmd->timeout;

        if (ngx_http_throttle_redis_append_eval(conn, cmd) == NGX_OK) {
            ngx_http_throttle_redis_flush(conn);
            return true;
        }

        return false;
    }

    return conn->node->worker->events->steer
        && conn->node->worker->events->steer(conn, cmd, reply);
}

/* Hands a reply to the oldest command; false if the connection is gone. */
bool
ngx_http_throttle_redis_dispatch(ngx_http_throttle_redis_conn_t *conn,
                                 redisReply                     *reply) noexcept
{
    ngx_queue_t                   *q;
    ngx_http_throttle_redis_cmd_t *cmd;

    if (ngx_queue_empty(&conn->awaiting)) {
        if (conn->watching) {
            conn->node->worker->events->news(conn, reply);
            return conn->state != NGX_HTTP_THROTTLE_REDIS_CLOSED;
        }

        ngx_http_throttle_redis_fail_as(conn, NGX_HTTP_THROTTLE_REDIS_ERR_REPLY,
                                        "reply to no command");
        return false;
    }

    q = ngx_queue_head(&conn->awaiting);
    cmd = ngx_queue_data(q, ngx_http_throttle_redis_cmd_t, queue);

    if (cmd->kind > NGX_HTTP_THROTTLE_REDIS_QUERY) {
        return ngx_http_throttle_redis_setup_done(conn, cmd, reply);
    }

    ngx_queue_remove(q);

    if (cmd->kind == NGX_HTTP_THROTTLE_REDIS_SCRIPT) {
        ngx_http_throttle_redis_count_latency(
            conn->node->worker->backend->metrics,
            throttle::monotonic_now_us() - cmd->written_us);
    }

    if (cmd->kind == NGX_HTTP_THROTTLE_REDIS_SCRIPT
        && reply->type == REDIS_REPLY_ERROR
        && ngx_http_throttle_redis_steer(conn, cmd, reply))
    {
        return conn->state != NGX_HTTP_THROTTLE_REDIS_CLOSED;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_http_throttle_redis_conn_error(conn,
                                           NGX_HTTP_THROTTLE_REDIS_ERR_REPLY);
    }

    conn->node->failures = 0;
    ngx_http_throttle_redis_finish(cmd, reply, NULL, true);

    return conn->state != NGX_HTTP_THROTTLE_REDIS_CLOSED;
}
