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
 * This file: the transport's API, a backend's nodes per worker, and which
 * one a command goes to. The files below it are listed in
 * ngx_http_throttle_redis_types.h.
 */

#include "ngx_http_throttle_redis.h"
#include "ngx_http_throttle_redis_cluster.h"
#include "ngx_http_throttle_redis_cmd.h"
#include "ngx_http_throttle_redis_conn.h"
#include "ngx_http_throttle_redis_node.h"
#include "ngx_http_throttle_redis_sentinel.h"
#include "ngx_http_throttle_redis_slots.h"

/* What the connections and their commands hand up, per topology. */

static const ngx_http_throttle_redis_events_t
    ngx_http_throttle_redis_server_events = {
        ngx_http_throttle_redis_queue_setup,
        ngx_http_throttle_redis_count_written,
        ngx_http_throttle_redis_dispatch,
        NULL,
        NULL,
        NULL,
        NULL,
};

static const ngx_http_throttle_redis_events_t
    ngx_http_throttle_redis_cluster_events = {
        ngx_http_throttle_redis_queue_setup,
        ngx_http_throttle_redis_count_written,
        ngx_http_throttle_redis_dispatch,
        NULL,
        ngx_http_throttle_redis_cluster_steer,
        NULL,
        ngx_http_throttle_redis_cluster_refresh_soon,
};

static const ngx_http_throttle_redis_events_t
    ngx_http_throttle_redis_sentinel_events = {
        ngx_http_throttle_redis_queue_setup,
        ngx_http_throttle_redis_count_written,
        ngx_http_throttle_redis_dispatch,
        ngx_http_throttle_redis_resolve,
        ngx_http_throttle_redis_sentinel_steer,
        ngx_http_throttle_redis_sentinel_news,
        NULL,
};

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
        worker->events = &ngx_http_throttle_redis_cluster_events;
        return ngx_http_throttle_redis_cluster_init(worker);

    case NGX_HTTP_THROTTLE_REDIS_SENTINEL:
        worker->events = &ngx_http_throttle_redis_sentinel_events;
        return ngx_http_throttle_redis_sentinel_init(worker, cycle->pool);

    default:
        worker->events = &ngx_http_throttle_redis_server_events;
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
