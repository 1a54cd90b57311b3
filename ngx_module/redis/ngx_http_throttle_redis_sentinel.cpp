/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A master found through Sentinel, as the Sentinel client protocol has it:
 * before each new connection to the master, the sentinels are asked in
 * turn (SENTINEL get-master-addr-by-name, within "connect_timeout" each)
 * where it is; the one that answers goes to the front. The connection then
 * checks with ROLE that it reached a master (ngx_http_throttle_redis_cmd.cpp);
 * a master that has become a replica (READONLY) or is not ready (LOADING,
 * MASTERDOWN) loses its connection, and the next one asks again. A
 * connection to one of the sentinels hears of "+switch-master" and has
 * them asked at once. When the answer names another address, every
 * connection to the old one closes.
 */

#include "ngx_http_throttle_redis_sentinel.h"
#include "ngx_http_throttle_redis_cmd.h"
#include "ngx_http_throttle_redis_conn.h"
#include "ngx_http_throttle_redis_node.h"

#include "ngx_http_throttle_params.h"

#include "throttle/cluster.hpp"

/* How soon a lost watching connection is made again. */
#define NGX_HTTP_THROTTLE_REDIS_REWATCH 1000 /* ms */

static void ngx_http_throttle_redis_ask_sentinel(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

/* No sentinel said where the master is: every connection waiting for
 * them fails. */
static void
ngx_http_throttle_redis_unresolved(ngx_http_throttle_redis_worker_t *worker,
                                   const char *err) noexcept
{
    ngx_uint_t                      i;
    ngx_http_throttle_redis_node_t *master = worker->nodes[0];

    ngx_http_throttle_redis_count_error(worker->backend->metrics,
                                        NGX_HTTP_THROTTLE_REDIS_ERR_SENTINEL);
    ngx_http_throttle_redis_log_error(worker, &master->name, err);

    for (i = 0; i < master->nconns; i++) {
        if (master->conns[i].state == NGX_HTTP_THROTTLE_REDIS_RESOLVING) {
            ngx_http_throttle_redis_fail(&master->conns[i], err);
        }
    }
}

/* The sentinels named the master: connections to another address close,
 * and those waiting connect. */
static void
ngx_http_throttle_redis_found(ngx_http_throttle_redis_worker_t *worker,
                              ngx_sockaddr_t *sa, socklen_t len) noexcept
{
    ngx_uint_t                      i;
    ngx_http_throttle_redis_conn_t *conn;
    ngx_http_throttle_redis_node_t *master = worker->nodes[0];
    u_char                          old[NGX_SOCKADDR_STRLEN];
    size_t                          old_len;

    if (master->socklen
        && ngx_cmp_sockaddr(&master->sockaddr.sockaddr, master->socklen,
                            &sa->sockaddr, len, 1)
            != NGX_OK)
    {
        ngx_http_throttle_redis_count_error(
            worker->backend->metrics, NGX_HTTP_THROTTLE_REDIS_ERR_FAILOVER);

        for (i = 0; i < master->nconns; i++) {
            conn = &master->conns[i];

            if (conn->state != NGX_HTTP_THROTTLE_REDIS_RESOLVING) {
                ngx_http_throttle_redis_drop(conn, "the master has moved");
            }
        }

        old_len = ngx_cpymem(old, master->name.data, master->name.len) - old;
        ngx_http_throttle_redis_set_address(master, &sa->sockaddr, len);

        /* the failures were the old address's: the new one is tried now */
        master->failures = 0;
        master->retry_at = ngx_current_msec;

        ngx_log_error(NGX_LOG_WARN, worker->log, 0,
                      "throttle redis \"%V\": master \"%V\" is now at %V "
                      "(was %*s)",
                      &worker->backend->name, &worker->backend->master,
                      &master->name, old_len, old);

    } else if (master->socklen == 0) {
        ngx_http_throttle_redis_set_address(master, &sa->sockaddr, len);
    }

    for (i = 0; i < master->nconns; i++) {
        conn = &master->conns[i];

        if (conn->state == NGX_HTTP_THROTTLE_REDIS_RESOLVING) {
            ngx_http_throttle_redis_connect(conn);
        }
    }
}

/* The first sentinel to answer goes to the front: the next question goes
 * to it first. */
static void
ngx_http_throttle_redis_front(ngx_http_throttle_redis_worker_t *worker,
                              ngx_http_throttle_redis_node_t *sentinel) noexcept
{
    ngx_uint_t i;

    for (i = 0; worker->sentinels[i] != sentinel; i++) {
        /* void */
    }

    for (; i > 0; i--) {
        worker->sentinels[i] = worker->sentinels[i - 1];
    }

    worker->sentinels[0] = sentinel;
}

/* A sentinel's answer, or its failure. */
static void
ngx_http_throttle_redis_sentinel_read(void *data, redisReply *reply,
                                      const char *err, bool sent) noexcept
{
    ngx_http_throttle_redis_node_t   *sentinel;
    ngx_http_throttle_redis_worker_t *worker;
    throttle::MasterAddress           answer;
    ngx_sockaddr_t                    sa;
    socklen_t                         len;

    sentinel = (ngx_http_throttle_redis_node_t *) data;
    worker = sentinel->worker;

    if (worker->exiting) {
        worker->resolver.resolving = 0;
        return;
    }

    if (reply) {
        answer = throttle::read_master_address(reply);

        if (answer.status == throttle::MasterAddress::Status::found
            && ngx_http_throttle_redis_parse_address(answer.address, &sa, &len))
        {
            worker->resolver.resolving = 0;
            ngx_http_throttle_redis_front(worker, sentinel);
            ngx_http_throttle_redis_found(worker, &sa, len);
            return;
        }

        if (answer.status == throttle::MasterAddress::Status::unknown) {
            worker->resolver.unknown = 1;

        } else {
            ngx_http_throttle_redis_log_error(
                worker, &sentinel->name,
                "the sentinel's answer is not an address");
        }
    }

    /* (a failure is in the log already) */
    ngx_http_throttle_redis_ask_sentinel(worker);
}

/* Asks the next sentinel where the master is, until one takes the
 * question; when none is left, the connections waiting fail. */
static void
ngx_http_throttle_redis_ask_sentinel(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_http_throttle_redis_resolver_t *resolver = &worker->resolver;
    ngx_http_throttle_redis_t          *backend = worker->backend;
    ngx_http_throttle_redis_node_t     *sentinel;
    ngx_http_throttle_redis_conn_t     *conn;
    const char                         *argv[3];
    size_t                              argvlen[3];
    char                                err[256];

    argv[0] = "SENTINEL";
    argvlen[0] = 8;
    argv[1] = "get-master-addr-by-name";
    argvlen[1] = 23;
    argv[2] = (const char *) backend->master.data;
    argvlen[2] = backend->master.len;

    while (resolver->asked < worker->nsentinels) {
        sentinel = worker->sentinels[resolver->asked++];

        conn = ngx_http_throttle_redis_pick(sentinel);

        if (conn
            && ngx_http_throttle_redis_conn_query(
                conn, 3, argv, argvlen, backend->connect_timeout,
                ngx_http_throttle_redis_sentinel_read, sentinel))
        {
            return;
        }
    }

    resolver->resolving = 0;

    if (resolver->unknown) {
        ngx_snprintf((u_char *) err, sizeof(err) - 1,
                     "sentinels do not know master \"%V\"%Z", &backend->master);
    } else {
        ngx_snprintf((u_char *) err, sizeof(err) - 1,
                     "no sentinel answered where master \"%V\" is%Z",
                     &backend->master);
    }

    ngx_http_throttle_redis_unresolved(worker, err);
}

/* Asks the sentinels where the master is, unless a question is out
 * already: its answer serves. */
static void
ngx_http_throttle_redis_ask_sentinels(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    if (worker->resolver.resolving || worker->exiting) {
        return;
    }

    worker->resolver.resolving = 1;
    worker->resolver.unknown = 0;
    worker->resolver.asked = 0;

    ngx_http_throttle_redis_ask_sentinel(worker);
}

void
ngx_http_throttle_redis_resolve(ngx_http_throttle_redis_conn_t *conn) noexcept
{
    conn->state = NGX_HTTP_THROTTLE_REDIS_RESOLVING;
    ngx_http_throttle_redis_ask_sentinels(conn->node->worker);
}

/* A message on the watching connection: a sentinel has replaced a
 * master. If it is this one, the connections to the old one close at once
 * rather than at the next reconnect (the old master may take writes for a
 * while before it learns it is a replica: they would be lost), and the
 * next go to the address the message names: the sentinel that sent it has
 * switched, where one asked now may not have heard of it yet. A message
 * whose address cannot be used has the sentinels asked. */
void
ngx_http_throttle_redis_sentinel_news(ngx_http_throttle_redis_conn_t *conn,
                                      redisReply *reply) noexcept
{
    ngx_http_throttle_redis_worker_t *worker = conn->node->worker;
    throttle::MasterAddress           news;
    ngx_sockaddr_t                    sa;
    socklen_t                         len;

    news = throttle::read_switch_master(
        reply, ngx_http_throttle_sv(worker->backend->master));

    if (news.status == throttle::MasterAddress::Status::unknown) {
        return;
    }

    if (news.status == throttle::MasterAddress::Status::found
        && ngx_http_throttle_redis_parse_address(news.address, &sa, &len))
    {
        ngx_http_throttle_redis_found(worker, &sa, len);
        return;
    }

    ngx_http_throttle_redis_log_error(
        worker, &conn->node->name,
        "a +switch-master message names no address: asking the sentinels");
    ngx_http_throttle_redis_ask_sentinels(worker);
}

/* SUBSCRIBE's answer: watching from now on; a switch missed while no
 * connection watched is looked for now. */
static void
ngx_http_throttle_redis_watching(void *data, redisReply *reply, const char *err,
                                 bool sent) noexcept
{
    ngx_http_throttle_redis_worker_t *worker;

    worker = (ngx_http_throttle_redis_worker_t *) data;

    if (reply && reply->type != REDIS_REPLY_ERROR) {
        ngx_http_throttle_redis_ask_sentinels(worker);
    }
}

/* Every second: a connection that watches one of the sentinels (in turn,
 * should one be gone) for "+switch-master", unless there is one. */
static void
ngx_http_throttle_redis_rewatch(ngx_event_t *ev) noexcept
{
    ngx_http_throttle_redis_worker_t *worker;
    ngx_http_throttle_redis_conn_t   *watch;
    const char                       *argv[2] = {"SUBSCRIBE", "+switch-master"};
    size_t                            argvlen[2] = {9, 14};

    worker = (ngx_http_throttle_redis_worker_t *) ev->data;
    watch = &worker->resolver.watch;

    if (worker->exiting) {
        return;
    }

    ngx_add_timer(ev, NGX_HTTP_THROTTLE_REDIS_REWATCH);

    if (watch->state != NGX_HTTP_THROTTLE_REDIS_CLOSED) {
        return;
    }

    watch->node =
        worker->sentinels[worker->resolver.watch_next++ % worker->nsentinels];
    watch->watching = 0;

    if (ngx_http_throttle_redis_node_backing_off(watch->node)
        || ngx_http_throttle_redis_open(watch) != NGX_OK
        || watch->state == NGX_HTTP_THROTTLE_REDIS_CLOSED)
    {
        return;
    }

    if (ngx_http_throttle_redis_conn_query(
            watch, 2, argv, argvlen, worker->backend->connect_timeout,
            ngx_http_throttle_redis_watching, worker))
    {
        watch->watching = 1;
    }
}

void
ngx_http_throttle_redis_sentinel_exit(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_http_throttle_redis_conn_t *watch = &worker->resolver.watch;

    if (worker->resolver.rewatch.timer_set) {
        ngx_del_timer(&worker->resolver.rewatch);
    }

    ngx_http_throttle_redis_fail(watch, "worker exiting");
    ngx_free(watch->out);
    watch->out = NULL;
}

bool
ngx_http_throttle_redis_sentinel_steer(ngx_http_throttle_redis_conn_t *conn,
                                       ngx_http_throttle_redis_cmd_t  *cmd,
                                       redisReply *reply) noexcept
{
    std::string_view text(reply->str, reply->len);
    char             err[256];

    switch (
        throttle::read_error(text, ngx_http_throttle_sv(conn->node->address))
            .kind)
    {

    case throttle::ErrorKind::readonly:
    case throttle::ErrorKind::loading:
    case throttle::ErrorKind::masterdown:
        break;

    default:
        return false;
    }

    /* no master there (any more): the sentinels are asked again on the
     * next connection, and the script, which did not run, fails */
    ngx_snprintf((u_char *) err, sizeof(err) - 1, "%*s%Z",
                 ngx_min(text.size(), (size_t) 200), text.data());
    ngx_http_throttle_redis_fail_as(conn, NGX_HTTP_THROTTLE_REDIS_ERR_FAILOVER,
                                    err);
    ngx_http_throttle_redis_finish(cmd, NULL, err, false);
    return true;
}

/* The sentinels (every address of each) and the master, whose address
 * they give. */
ngx_int_t
ngx_http_throttle_redis_sentinel_init(ngx_http_throttle_redis_worker_t *worker,
                                      ngx_pool_t *pool) noexcept
{
    ngx_uint_t                      i, j, n;
    ngx_url_t                      *urls;
    ngx_str_t                       none = ngx_null_string;
    ngx_http_throttle_redis_node_t *master;
    ngx_http_throttle_redis_t      *backend = worker->backend;

    urls = (ngx_url_t *) backend->addresses.elts;

    for (n = 0, i = 0; i < backend->addresses.nelts; i++) {
        n += urls[i].naddrs;
    }

    worker->sentinels = (ngx_http_throttle_redis_node_t **) ngx_palloc(
        pool, n * sizeof(ngx_http_throttle_redis_node_t *));
    if (worker->sentinels == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < backend->addresses.nelts; i++) {
        for (j = 0; j < urls[i].naddrs; j++) {
            worker->sentinels[worker->nsentinels] =
                ngx_http_throttle_redis_add_node(worker, &urls[i].addrs[j],
                                                 &urls[i].host, true);
            if (worker->sentinels[worker->nsentinels++] == NULL) {
                return NGX_ERROR;
            }
        }
    }

    master = ngx_http_throttle_redis_add_node(worker, NULL, &none, false);
    if (master == NULL) {
        return NGX_ERROR;
    }

    /* what the log calls it until the sentinels say where it is */
    master->name = backend->master;

    ngx_queue_init(&worker->resolver.watch.awaiting);
    worker->resolver.rewatch.handler = ngx_http_throttle_redis_rewatch;
    worker->resolver.rewatch.data = worker;
    worker->resolver.rewatch.log = worker->log;
    /* a worker shutting down does not wait for it */
    worker->resolver.rewatch.cancelable = 1;
    ngx_add_timer(&worker->resolver.rewatch,
                  1 + (ngx_msec_t) ngx_random() % 10);

    return NGX_OK;
}
