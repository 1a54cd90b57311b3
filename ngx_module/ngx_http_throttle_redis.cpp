/*
 * The Redis transport. Each worker keeps "keepalive" connections per
 * backend and spreads commands over them; commands on a connection are
 * pipelined (written as they come, answered in order), so one slow reply
 * means all later ones are late too: when the oldest command outlives
 * "timeout", the connection is closed, every command on it fails at once,
 * and the backend backs off (with jitter) before the next connect. While it
 * backs off, commands fail immediately, so requests never queue behind a
 * dead Redis.
 *
 * This file: a worker's connections to a backend, which one a command
 * takes, and backing off. One connection's life is in
 * ngx_http_throttle_redis_conn.cpp (see ngx_http_throttle_redis_conn.h).
 */

#include "ngx_http_throttle_redis_conn.h"

#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MIN 50   /* ms */
#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MAX 2000 /* ms */

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
void
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

static bool
ngx_http_throttle_redis_worker_backing_off(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    return (ngx_msec_int_t) (worker->retry_at - ngx_current_msec) > 0;
}

ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_eval(ngx_http_throttle_redis_t            *backend,
                             const ngx_http_throttle_redis_call_t *call,
                             ngx_http_throttle_redis_done_pt       done,
                             void *data) noexcept
{
    ngx_http_throttle_redis_conn_t   *conn;
    ngx_http_throttle_redis_worker_t *worker = backend->worker;

    if (worker == NULL || call->nkeys == 0) {
        return NULL;
    }

    conn = &worker->conns[worker->next++ % backend->keepalive];

    if (conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        if (ngx_http_throttle_redis_worker_backing_off(worker)) {
            return NULL; /* answer now, not in "timeout" */
        }

        if (ngx_http_throttle_redis_connect(conn) != NGX_OK
            || conn->state == NGX_HTTP_THROTTLE_REDIS_CLOSED)
        {
            return NULL;
        }
    }

    return ngx_http_throttle_redis_conn_eval(conn, call, done, data);
}

bool
ngx_http_throttle_redis_backing_off(ngx_http_throttle_redis_t *backend) noexcept
{
    return backend->worker == NULL
        || ngx_http_throttle_redis_worker_backing_off(backend->worker);
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
        ngx_queue_init(&worker->conns[i].awaiting);
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
     * failures below are held back */
    worker->error_log.last = ngx_current_msec;

    for (i = 0; i < backend->keepalive; i++) {
        ngx_http_throttle_redis_fail(&worker->conns[i], "worker exiting");
        ngx_free(worker->conns[i].out);
        worker->conns[i].out = NULL;
    }

    backend->worker = NULL;
}
