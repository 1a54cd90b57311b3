/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Redis transport. Each worker keeps, per backend, the nodes it talks
 * to: the one server, the master the sentinels name, or a Cluster's nodes;
 * "keepalive" connections each, made when first needed. Commands on a
 * connection are pipelined (written as they come, answered in order), so
 * one slow reply means all later ones are late too: when the oldest command
 * outlives "timeout", the connection is closed, every command on it fails
 * at once, and the node backs off (with jitter) before the next connect.
 * While it backs off, commands for it fail immediately, so requests never
 * queue behind a dead Redis.
 *
 * This file: a worker's nodes, which one a command goes to, and backing
 * off. One connection's life is in ngx_http_throttle_redis_conn.cpp (see
 * ngx_http_throttle_redis_conn.h).
 */

#include "ngx_http_throttle_redis_conn.h"

#include "throttle/cluster.hpp"

#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MIN 50   /* ms */
#define NGX_HTTP_THROTTLE_REDIS_BACKOFF_MAX 2000 /* ms */

/* One line a second at most per backend and worker: a dead Redis under
 * load would otherwise write one line per request. A sentinel's failures
 * have their own line, a warning: the sentinels are there to be
 * redundant, and their summary ("no sentinel answered") is an error. */
static void
ngx_http_throttle_redis_log_limited(ngx_http_throttle_redis_worker_t *worker,
                                    ngx_http_throttle_log_limit_t    *limit,
                                    ngx_uint_t level, ngx_str_t *where,
                                    const char *err) noexcept
{
    if (!ngx_http_throttle_log_due(limit, ngx_current_msec, 1000)) {
        return;
    }

    ngx_log_error(level, worker->log, 0, "throttle redis \"%V\" (%V): %s%s",
                  &worker->backend->name, where, err,
                  limit->suppressed ? " (and earlier errors, not logged)" : "");

    limit->suppressed = 0;
}

void
ngx_http_throttle_redis_log_error(ngx_http_throttle_redis_worker_t *worker,
                                  ngx_str_t *where, const char *err) noexcept
{
    ngx_http_throttle_redis_log_limited(worker, &worker->error_log, NGX_LOG_ERR,
                                        where, err);
}

/* No new connection before a delay that doubles with each failure in a
 * row, with jitter so that workers and nodes do not reconnect in step. */
void
ngx_http_throttle_redis_back_off(ngx_http_throttle_redis_node_t *node,
                                 const char                     *err) noexcept
{
    ngx_msec_t backoff;

    node->failures++;
    backoff = (ngx_msec_t) NGX_HTTP_THROTTLE_REDIS_BACKOFF_MIN
        << ngx_min(node->failures - 1, 10);
    backoff = ngx_min(backoff, NGX_HTTP_THROTTLE_REDIS_BACKOFF_MAX);
    backoff = backoff / 2 + (ngx_msec_t) ngx_random() % (backoff / 2 + 1);
    node->retry_at = ngx_current_msec + backoff;

    if (node->sentinel) {
        ngx_http_throttle_redis_log_limited(node->worker,
                                            &node->worker->sentinel_log,
                                            NGX_LOG_WARN, &node->name, err);
        return;
    }

    ngx_http_throttle_redis_log_error(node->worker, &node->name, err);

    if (node->worker->backend->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER) {
        /* the node may be gone for good: its slots may be elsewhere */
        ngx_http_throttle_redis_cluster_refresh_soon(node->worker);
    }
}

bool
ngx_http_throttle_redis_node_backing_off(
    ngx_http_throttle_redis_node_t *node) noexcept
{
    return (ngx_msec_int_t) (node->retry_at - ngx_current_msec) > 0;
}

/* A node with "keepalive" connections (one for a sentinel), and room for
 * its name; the address is the node's own copy. NULL if out of memory. */
ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_add_node(ngx_http_throttle_redis_worker_t *worker,
                                 ngx_addr_t *addr, ngx_str_t *host,
                                 bool sentinel) noexcept
{
    size_t                          size;
    ngx_uint_t                      i, nconns;
    ngx_http_throttle_redis_node_t *node, **nodes;

    nconns = sentinel ? 1 : worker->backend->keepalive;
    size = sizeof(ngx_http_throttle_redis_node_t)
        + nconns * sizeof(ngx_http_throttle_redis_conn_t) + host->len;

    node = (ngx_http_throttle_redis_node_t *) ngx_calloc(size, worker->log);
    if (node == NULL) {
        return NULL;
    }

    node->worker = worker;
    node->sentinel = sentinel;
    node->conns = (ngx_http_throttle_redis_conn_t *) (node + 1);
    node->nconns = nconns;
    node->host.data = (u_char *) (node->conns + nconns);
    node->host.len = host->len;

    if (host->len) {
        ngx_memcpy(node->host.data, host->data, host->len);
    }

    for (i = 0; i < nconns; i++) {
        node->conns[i].node = node;
        ngx_queue_init(&node->conns[i].awaiting);
    }

    if (addr) {
        ngx_http_throttle_redis_set_address(node, addr->sockaddr,
                                            addr->socklen);
    }

    if (sentinel) {
        return node;
    }

    nodes = (ngx_http_throttle_redis_node_t **) ngx_alloc(
        (worker->nnodes + 1) * sizeof(ngx_http_throttle_redis_node_t *),
        worker->log);
    if (nodes == NULL) {
        ngx_free(node);
        return NULL;
    }

    if (worker->nnodes) {
        ngx_memcpy(nodes, worker->nodes,
                   worker->nnodes * sizeof(ngx_http_throttle_redis_node_t *));
    }

    ngx_free(worker->nodes);
    worker->nodes = nodes;
    worker->nodes[worker->nnodes++] = node;

    return node;
}

/* Where a node is: its address, as a socket address and as text, and the
 * name the log gives it. */
void
ngx_http_throttle_redis_set_address(ngx_http_throttle_redis_node_t *node,
                                    struct sockaddr                *sockaddr,
                                    socklen_t socklen) noexcept
{
    ngx_memcpy(&node->sockaddr, sockaddr, socklen);
    node->socklen = socklen;
    node->name.data = node->text;
    node->name.len =
        ngx_sock_ntop(sockaddr, socklen, node->text, NGX_SOCKADDR_STRLEN, 1);
    node->address.data = node->address_text;
    node->address.len = ngx_sock_ntop(sockaddr, socklen, node->address_text,
                                      NGX_SOCKADDR_STRLEN, 0);
}

/* The address a reply names, as a socket address; the host must be an IP
 * address (a node announced by a host name would need a blocking DNS
 * lookup). */
bool
ngx_http_throttle_redis_parse_address(const throttle::NodeAddress &where,
                                      ngx_sockaddr_t              *sa,
                                      socklen_t                   *len) noexcept
{
    in_addr_t addr;

    addr = ngx_inet_addr((u_char *) where.host.data(), where.host.size());

    if (addr != INADDR_NONE) {
        ngx_memzero(sa, sizeof(struct sockaddr_in));
        sa->sockaddr_in.sin_family = AF_INET;
        sa->sockaddr_in.sin_addr.s_addr = addr;
        *len = sizeof(struct sockaddr_in);

#if (NGX_HAVE_INET6)
    } else if (ngx_inet6_addr((u_char *) where.host.data(), where.host.size(),
                              sa->sockaddr_in6.sin6_addr.s6_addr)
               == NGX_OK)
    {
        sa->sockaddr_in6.sin6_family = AF_INET6;
        sa->sockaddr_in6.sin6_port = 0;
        sa->sockaddr_in6.sin6_flowinfo = 0;
        sa->sockaddr_in6.sin6_scope_id = 0;
        *len = sizeof(struct sockaddr_in6);
#endif

    } else {
        return false;
    }

    ngx_inet_set_port(&sa->sockaddr, (in_port_t) where.port);
    return true;
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

/* A command's end: its requester hears of it, unless it left. */
void
ngx_http_throttle_redis_finish(ngx_http_throttle_redis_cmd_t *cmd,
                               redisReply *reply, const char *err,
                               bool sent) noexcept
{
    if (cmd->done) {
        cmd->done(cmd->data, reply, err, sent);
    }

    ngx_free(cmd);
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

/* The node a script call goes to; NULL if none can take it now. */
static ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_route(
    ngx_http_throttle_redis_worker_t     *worker,
    const ngx_http_throttle_redis_call_t *call) noexcept
{
    if (worker->backend->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER) {
        return ngx_http_throttle_redis_cluster_route(worker, &call->keys[0]);
    }

    return worker->nodes[0];
}

ngx_http_throttle_redis_cmd_t *
ngx_http_throttle_redis_eval(ngx_http_throttle_redis_t            *backend,
                             const ngx_http_throttle_redis_call_t *call,
                             ngx_http_throttle_redis_done_pt       done,
                             void *data) noexcept
{
    ngx_http_throttle_redis_cmd_t    *cmd;
    ngx_http_throttle_redis_node_t   *node;
    ngx_http_throttle_redis_worker_t *worker = backend->worker;

    if (worker == NULL || call->nkeys == 0) {
        return NULL;
    }

    node = ngx_http_throttle_redis_route(worker, call);

    if (node == NULL) {
        return NULL;
    }

    cmd = ngx_http_throttle_redis_create_cmd(worker, call);
    if (cmd == NULL) {
        return NULL;
    }

    cmd->done = done;
    cmd->data = data;

    if (!ngx_http_throttle_redis_send(node, cmd, false)) {
        ngx_free(cmd);
        return NULL;
    }

    return cmd;
}

bool
ngx_http_throttle_redis_clustered(ngx_http_throttle_redis_t *backend) noexcept
{
    return backend->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER;
}

bool
ngx_http_throttle_redis_backing_off(ngx_http_throttle_redis_t *backend) noexcept
{
    if (backend->worker == NULL) {
        return true;
    }

    /* a Cluster's nodes back off one by one: its calls find out each */
    return backend->topology != NGX_HTTP_THROTTLE_REDIS_CLUSTER
        && ngx_http_throttle_redis_node_backing_off(backend->worker->nodes[0]);
}

void
ngx_http_throttle_redis_detach(ngx_http_throttle_redis_cmd_t *cmd) noexcept
{
    cmd->done = NULL;
    cmd->data = NULL;
}

/* The configured addresses as nodes: the one server, a Cluster's first
 * nodes, the sentinels. */
ngx_int_t
ngx_http_throttle_redis_init_worker(ngx_cycle_t               *cycle,
                                    ngx_http_throttle_redis_t *backend) noexcept
{
    ngx_http_throttle_redis_worker_t *worker;
    ngx_url_t                        *url;

    worker = (ngx_http_throttle_redis_worker_t *) ngx_pcalloc(
        cycle->pool, sizeof(ngx_http_throttle_redis_worker_t));
    if (worker == NULL) {
        return NGX_ERROR;
    }

    worker->backend = backend;
    worker->log = cycle->log;
    backend->worker = worker;
    ngx_http_throttle_redis_metrics_init_worker(backend->metrics);

    switch (backend->topology) {

    case NGX_HTTP_THROTTLE_REDIS_CLUSTER:
        return ngx_http_throttle_redis_cluster_init(worker);

    case NGX_HTTP_THROTTLE_REDIS_SENTINEL:
        return ngx_http_throttle_redis_sentinel_init(worker, cycle->pool);

    default:
        url = (ngx_url_t *) backend->addresses.elts;
        return ngx_http_throttle_redis_add_node(worker, &url->addrs[0],
                                                &url->host, false)
            ? NGX_OK
            : NGX_ERROR;
    }
}

static void
ngx_http_throttle_redis_free_node(ngx_http_throttle_redis_node_t *node) noexcept
{
    for (ngx_uint_t i = 0; i < node->nconns; i++) {
        ngx_free(node->conns[i].out);
    }

    ngx_free(node);
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
     * failures below are held back; and what their requesters send
     * meanwhile fails at once */
    worker->error_log.last = ngx_current_msec;
    worker->sentinel_log.last = ngx_current_msec;
    worker->exiting = 1;
    backend->worker = NULL;

    if (worker->slots.timer.timer_set) {
        ngx_del_timer(&worker->slots.timer);
    }

    if (backend->topology == NGX_HTTP_THROTTLE_REDIS_SENTINEL) {
        ngx_http_throttle_redis_sentinel_exit(worker);
    }

    /* every command fails before any node goes: a requester that hears
     * of its failure may send another one */
    for (i = 0; i < worker->nsentinels; i++) {
        ngx_http_throttle_redis_fail_node(worker->sentinels[i],
                                          "worker exiting");
    }

    for (i = 0; i < worker->nnodes; i++) {
        ngx_http_throttle_redis_fail_node(worker->nodes[i], "worker exiting");
    }

    for (i = 0; i < worker->nsentinels; i++) {
        ngx_http_throttle_redis_free_node(worker->sentinels[i]);
    }

    for (i = 0; i < worker->nnodes; i++) {
        ngx_http_throttle_redis_free_node(worker->nodes[i]);
    }

    ngx_free(worker->nodes);
    ngx_free(worker->slots.owner);
}
