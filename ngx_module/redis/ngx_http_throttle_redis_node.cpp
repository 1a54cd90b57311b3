/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A worker's nodes of a backend: the one server, the master the sentinels
 * name, a sentinel, or a Cluster's nodes, found by the address or the
 * host name a reply gives. A node whose connection fails backs off, with
 * jitter, before the next connect; the log says so once a second at most.
 */

#include "ngx_http_throttle_redis_node.h"

#include "ngx_http_throttle_params.h"

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

    if (node->worker->events->node_failed) {
        node->worker->events->node_failed(node->worker);
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

/* Nodes a worker keeps for a Cluster, those it was given included. */
#define NGX_HTTP_THROTTLE_REDIS_MAX_NODES 1024

/* Whether a slot map announced the node by this host name, at this port:
 * MOVED and ASK name a node so when its endpoint is a host name. */
static bool
ngx_http_throttle_redis_node_named(ngx_http_throttle_redis_node_t *node,
                                   std::string_view                name,
                                   unsigned port) noexcept
{
    return node->announced.len != 0
        && ngx_http_throttle_sv(node->announced) == name
        && ngx_inet_get_port(&node->sockaddr.sockaddr) == port;
}

/* Remembers that a slot map announces the node by this host name (beside
 * its address); a node that had that name and port before, at an address
 * the node has left, loses it. */
void
ngx_http_throttle_redis_cluster_name(ngx_http_throttle_redis_node_t *node,
                                     std::string_view name) noexcept
{
    ngx_uint_t                        i;
    in_port_t                         port;
    ngx_http_throttle_redis_worker_t *worker = node->worker;

    port = ngx_inet_get_port(&node->sockaddr.sockaddr);

    for (i = 0; i < worker->nnodes; i++) {
        if (ngx_http_throttle_redis_node_named(worker->nodes[i], name, port)) {
            worker->nodes[i]->announced.len = 0;
        }
    }

    if (name.size() > sizeof(node->announced_text)) {
        return; /* longer than Redis allows: not a name to follow */
    }

    ngx_memcpy(node->announced_text, name.data(), name.size());
    node->announced.data = node->announced_text;
    node->announced.len = name.size();
}

/* The node a slot map announced by the host name a reply gives, or NULL. */
static ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_named(
    ngx_http_throttle_redis_worker_t *worker,
    const throttle::NodeAddress      &where) noexcept
{
    for (ngx_uint_t i = 0; i < worker->nnodes; i++) {
        if (ngx_http_throttle_redis_node_named(worker->nodes[i], where.host,
                                               where.port))
        {
            return worker->nodes[i];
        }
    }

    return NULL;
}

/* The node at the address a reply of node "from" names (or by the host
 * name a slot map announced it by), added if new; NULL if the address
 * cannot be used (logged) or out of memory. */
ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_node(
    ngx_http_throttle_redis_worker_t *worker,
    const throttle::NodeAddress      &where,
    ngx_http_throttle_redis_node_t   *from) noexcept
{
    ngx_uint_t                      i;
    ngx_sockaddr_t                  sa;
    socklen_t                       len;
    ngx_addr_t                      addr;
    ngx_str_t                       host = ngx_null_string;
    ngx_http_throttle_redis_node_t *named;
    char                            err[NGX_SOCKADDR_STRLEN + 128];

    if (!ngx_http_throttle_redis_parse_address(where, &sa, &len)) {
        named = ngx_http_throttle_redis_cluster_named(worker, where);

        if (named == NULL) {
            ngx_snprintf((u_char *) err, sizeof(err) - 1,
                         "no slot map gave an address beside the host "
                         "name \"%*s\" (port %ud)%Z",
                         ngx_min(where.host.size(), (size_t) 64),
                         where.host.data(), where.port);
            ngx_http_throttle_redis_log_error(worker, &from->name, err);
        }

        return named;
    }

    for (i = 0; i < worker->nnodes; i++) {
        if (ngx_cmp_sockaddr(&worker->nodes[i]->sockaddr.sockaddr,
                             worker->nodes[i]->socklen, &sa.sockaddr, len, 1)
            == NGX_OK)
        {
            return worker->nodes[i];
        }
    }

    if (worker->nnodes >= NGX_HTTP_THROTTLE_REDIS_MAX_NODES) {
        ngx_http_throttle_redis_log_error(worker, &from->name,
                                          "too many cluster nodes");
        return NULL;
    }

    addr.sockaddr = &sa.sockaddr;
    addr.socklen = len;

    /* no host configured: its certificate is checked against its address */
    return ngx_http_throttle_redis_add_node(worker, &addr, &host, false);
}

/* The node's place in the slot map: its index in "nodes", plus one. */
uint16_t
ngx_http_throttle_redis_node_index(
    ngx_http_throttle_redis_worker_t *worker,
    ngx_http_throttle_redis_node_t   *node) noexcept
{
    ngx_uint_t i;

    for (i = 0; i < worker->nnodes && worker->nodes[i] != node; i++) {
        /* void */
    }

    return (uint16_t) (i + 1);
}
