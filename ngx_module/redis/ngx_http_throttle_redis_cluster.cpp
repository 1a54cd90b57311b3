/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A Redis Cluster, as one worker sees it: its nodes, and which one a script
 * goes to: the master of its key's slot (every script's keys share one hash
 * tag: one slot), as the slot map says (ngx_http_throttle_redis_slots.cpp).
 * MOVED moves the slot at once and the command with it, and the whole map
 * is read again soon; ASK sends the command there once, after ASKING. The
 * commands for the slots of a master that is gone go to the other nodes:
 * until a replica takes the slots over they answer an error at once
 * (CLUSTERDOWN, or MOVED to the dead master), and from the moment they know
 * of the replica they say so (MOVED), before the next map does. A MOVED or ASK
 * that names a node by host name (cluster-preferred-endpoint-type hostname)
 * goes to the node a slot map announced by that name, beside its address: no
 * name is looked up.
 */

#include "ngx_http_throttle_redis_cluster.h"
#include "ngx_http_throttle_redis_cmd.h"
#include "ngx_http_throttle_redis_node.h"
#include "ngx_http_throttle_redis_slots.h"

#include "ngx_http_throttle_params.h"

#include "throttle/cluster.hpp"

/* Whether any connection to the node is open (or on its way). */
static bool
ngx_http_throttle_redis_node_connected(
    ngx_http_throttle_redis_node_t *node) noexcept
{
    for (ngx_uint_t i = 0; i < node->nconns; i++) {
        if (node->conns[i].state != NGX_HTTP_THROTTLE_REDIS_CLOSED) {
            return true;
        }
    }

    return false;
}

/* A node that is not backing off, other than "failed" (round robin), or
 * "failed" (which may be NULL) if there is none. */
static ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_other(
    ngx_http_throttle_redis_worker_t *worker,
    ngx_http_throttle_redis_node_t   *failed) noexcept
{
    ngx_uint_t                      i;
    ngx_http_throttle_redis_node_t *node;

    for (i = 0; i < worker->nnodes; i++) {
        node = worker->nodes[worker->next++ % worker->nnodes];

        if (node != failed && !ngx_http_throttle_redis_node_backing_off(node)) {
            return node;
        }
    }

    return failed;
}

ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_route(ngx_http_throttle_redis_worker_t *worker,
                                      const ngx_str_t *key) noexcept
{
    unsigned                        slot;
    uint16_t                        owner;
    ngx_http_throttle_redis_node_t *node;
    ngx_str_t                      *name = &worker->backend->name;
    char                            err[64];

    slot = throttle::key_slot(ngx_http_throttle_sv(*key));
    owner = worker->slots.owner[slot];

    if (owner) {
        node = worker->nodes[owner - 1];

        if (!ngx_http_throttle_redis_node_backing_off(node)
            || ngx_http_throttle_redis_node_connected(node))
        {
            /* a slow reply closes one connection: the node is still
             * there, and its slots are still its own */
            return node;
        }

        /* it is gone: a replica may take its slots over, and another node
         * says so (MOVED) as soon as it knows, before the next map does;
         * until then that node's error answers the request at once */
        ngx_http_throttle_redis_cluster_refresh_soon(worker);
        return ngx_http_throttle_redis_cluster_other(worker, node);
    }

    ngx_http_throttle_redis_cluster_refresh_soon(worker);

    if (!worker->slots.loaded) {
        /* no map yet: any node, whose MOVED tells where the slot is */
        return ngx_http_throttle_redis_cluster_other(worker, NULL);
    }

    ngx_snprintf((u_char *) err, sizeof(err) - 1, "no node serves slot %ud%Z",
                 slot);
    ngx_http_throttle_redis_log_error(worker, name, err);
    return NULL;
}

/* Sends a command where a MOVED or an ASK points; the command ends here
 * if it has been sent on too often, or cannot be. */
static void
ngx_http_throttle_redis_redirect(ngx_http_throttle_redis_conn_t *conn,
                                 ngx_http_throttle_redis_cmd_t  *cmd,
                                 const throttle::ErrorReply     &error,
                                 std::string_view                text) noexcept
{
    ngx_http_throttle_redis_worker_t *worker = conn->node->worker;
    ngx_http_throttle_redis_node_t   *node;
    const char                       *why;
    char                              err[256];

    node =
        ngx_http_throttle_redis_cluster_node(worker, error.target, conn->node);

    if (error.kind == throttle::ErrorKind::moved && node) {
        worker->slots.owner[error.slot] =
            ngx_http_throttle_redis_node_index(worker, node);
    }

    if (error.kind == throttle::ErrorKind::moved || node == NULL) {
        /* the next map says where the slot is, and gives the address of a
         * node named by a host name not known yet */
        ngx_http_throttle_redis_cluster_refresh_soon(worker);
    }

    if (++cmd->redirects > (ngx_uint_t) worker->backend->max_redirects) {
        why = "too many redirections";

    } else if (node == NULL) {
        why = "cannot follow";

    } else if (ngx_http_throttle_redis_send(
                   node, cmd, error.kind == throttle::ErrorKind::ask))
    {
        return;

    } else {
        why = "cannot reach the node of";
    }

    ngx_snprintf((u_char *) err, sizeof(err) - 1, "%s \"%*s\"%Z", why,
                 ngx_min(text.size(), (size_t) 200), text.data());
    ngx_http_throttle_redis_log_error(worker, &conn->node->name, err);
    ngx_http_throttle_redis_finish(cmd, NULL, err, false);
}

bool
ngx_http_throttle_redis_cluster_steer(ngx_http_throttle_redis_conn_t *conn,
                                      ngx_http_throttle_redis_cmd_t  *cmd,
                                      redisReply *reply) noexcept
{
    std::string_view                  text(reply->str, reply->len);
    ngx_http_throttle_redis_worker_t *worker = conn->node->worker;
    char                              err[256];
    throttle::ErrorReply              error =
        throttle::read_error(text, ngx_http_throttle_sv(conn->node->address));

    switch (error.kind) {

    case throttle::ErrorKind::moved:
    case throttle::ErrorKind::ask:
        ngx_http_throttle_redis_conn_error(
            conn,
            error.kind == throttle::ErrorKind::ask
                ? NGX_HTTP_THROTTLE_REDIS_ERR_ASK
                : NGX_HTTP_THROTTLE_REDIS_ERR_MOVED);
        ngx_http_throttle_redis_redirect(conn, cmd, error, text);
        return true;

    case throttle::ErrorKind::readonly:
    case throttle::ErrorKind::loading:
    case throttle::ErrorKind::masterdown:
        /* the map is out of date: that node is no master (yet) */
        ngx_http_throttle_redis_conn_error(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_FAILOVER);
        ngx_http_throttle_redis_cluster_refresh_soon(worker);
        break;

    case throttle::ErrorKind::clusterdown:
        /* a master is gone: the map that names its replica is read as
         * soon as one is promoted */
        ngx_http_throttle_redis_cluster_refresh_soon(worker);
        /* fall through */

    case throttle::ErrorKind::tryagain:
        ngx_http_throttle_redis_conn_error(
            conn, NGX_HTTP_THROTTLE_REDIS_ERR_CLUSTERDOWN);
        break;

    default:
        return false;
    }

    /* the script did not run: the requester decides without it */
    ngx_snprintf((u_char *) err, sizeof(err) - 1, "%*s%Z",
                 ngx_min(text.size(), (size_t) 200), text.data());
    ngx_http_throttle_redis_log_error(worker, &conn->node->name, err);
    ngx_http_throttle_redis_finish(cmd, NULL, err, false);
    return true;
}

/* The configured nodes (every address of each), and the slot map. */
ngx_int_t
ngx_http_throttle_redis_cluster_init(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_uint_t                 i, j;
    ngx_url_t                 *urls;
    ngx_http_throttle_redis_t *backend = worker->backend;

    urls = (ngx_url_t *) backend->addresses.elts;

    for (i = 0; i < backend->addresses.nelts; i++) {
        for (j = 0; j < urls[i].naddrs; j++) {
            if (ngx_http_throttle_redis_add_node(worker, &urls[i].addrs[j],
                                                 &urls[i].host, false)
                == NULL)
            {
                return NGX_ERROR;
            }
        }
    }

    return ngx_http_throttle_redis_slots_init(worker);
}
