/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A Redis Cluster's slot map, as one worker knows it: the master of each of
 * the 16384 slots, read with CLUSTER SLOTS (CLUSTER SHARDS where SLOTS
 * fails) from any node that answers, the configured ones included for
 * ever. The map is read when the worker starts, every "cluster_refresh",
 * and soon after anything says it is out of date (a node fails, a MOVED,
 * a CLUSTERDOWN, a former master's READONLY), but never twice within
 * NGX_HTTP_THROTTLE_REDIS_REFRESH_GAP.
 */

#include "ngx_http_throttle_redis_slots.h"
#include "ngx_http_throttle_redis_cmd.h"
#include "ngx_http_throttle_redis_conn.h"
#include "ngx_http_throttle_redis_node.h"

#include "ngx_http_throttle_params.h"

#include "throttle/cluster.hpp"

/* Refreshes of the map that a failure or a redirection asks for: at most
 * one per this many ms. While a master is gone, the requests for its
 * slots keep asking, so the map that names its promoted replica is read
 * at most this long after the survivors know of it; and a worker reads
 * the map at most ten times a second, however many requests fail. */
#define NGX_HTTP_THROTTLE_REDIS_REFRESH_GAP 100 /* ms */

static void ngx_http_throttle_redis_cluster_ask(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

/* A map being read: each range's master gets its slots. */
typedef struct {
    ngx_http_throttle_redis_worker_t *worker;
    ngx_http_throttle_redis_node_t   *asker;
    uint16_t                         *owner;
} ngx_http_throttle_redis_map_t;

static bool
ngx_http_throttle_redis_map_range(void                      *data,
                                  const throttle::SlotRange &range) noexcept
{
    ngx_http_throttle_redis_map_t  *map;
    ngx_http_throttle_redis_node_t *node;
    uint16_t                        index;

    map = (ngx_http_throttle_redis_map_t *) data;
    node = ngx_http_throttle_redis_cluster_node(map->worker, range.master,
                                                map->asker);
    if (node == NULL) {
        return true; /* those slots have no master this worker can reach */
    }

    if (!range.master_name.empty()) {
        ngx_http_throttle_redis_cluster_name(node, range.master_name);
    }

    index = ngx_http_throttle_redis_node_index(map->worker, node);

    for (unsigned slot = range.first; slot <= range.last; slot++) {
        map->owner[slot] = index;
    }

    return true;
}

/* Reads a CLUSTER SLOTS or SHARDS reply into a new map: null, or what
 * was wrong. */
static const char *
ngx_http_throttle_redis_read_map(ngx_http_throttle_redis_node_t *asker,
                                 redisReply                     *reply) noexcept
{
    const char                       *err;
    ngx_http_throttle_redis_map_t     map;
    ngx_http_throttle_redis_worker_t *worker = asker->worker;

    map.worker = worker;
    map.asker = asker;
    map.owner = (uint16_t *) ngx_calloc(
        throttle::kClusterSlots * sizeof(uint16_t), worker->log);
    if (map.owner == NULL) {
        return "out of memory";
    }

    err = worker->slots.shards
        ? throttle::read_cluster_shards(
            reply, ngx_http_throttle_sv(asker->address),
            ngx_http_throttle_redis_map_range, &map, worker->backend->tls)
        : throttle::read_cluster_slots(reply,
                                       ngx_http_throttle_sv(asker->address),
                                       ngx_http_throttle_redis_map_range, &map);

    if (err) {
        ngx_free(map.owner);
        return err;
    }

    ngx_free(worker->slots.owner);
    worker->slots.owner = map.owner;
    worker->slots.loaded = 1;
    return NULL;
}

/* A node's answer to CLUSTER SLOTS (or SHARDS), or its failure. */
static void
ngx_http_throttle_redis_cluster_read(void *data, redisReply *reply,
                                     const char *err, bool sent) noexcept
{
    ngx_http_throttle_redis_node_t   *asker;
    ngx_http_throttle_redis_worker_t *worker;
    char                              line[256];

    asker = (ngx_http_throttle_redis_node_t *) data;
    worker = asker->worker;

    if (reply && reply->type == REDIS_REPLY_ERROR && !worker->slots.shards) {
        /* a server without CLUSTER SLOTS: the same node, with SHARDS */
        worker->slots.shards = 1;
        worker->slots.asked--;
        worker->slots.ask_next--;

    } else if (reply) {
        err = ngx_http_throttle_redis_read_map(asker, reply);

        if (err == NULL) {
            worker->slots.refreshing = 0;
            return;
        }

        ngx_snprintf((u_char *) line, sizeof(line) - 1,
                     "cannot read the slot map: %s%Z", err);
        ngx_http_throttle_redis_log_error(worker, &asker->name, line);
    }

    ngx_http_throttle_redis_cluster_ask(worker);
}

/* Asks the next node for the slot map, until one takes the question or
 * every node was asked. */
static void
ngx_http_throttle_redis_cluster_ask(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_http_throttle_redis_slots_t *slots = &worker->slots;
    ngx_http_throttle_redis_node_t  *node;
    ngx_http_throttle_redis_conn_t  *conn;
    ngx_http_throttle_redis_t       *backend = worker->backend;
    const char                      *argv[2];
    size_t                           argvlen[2];

    while (!worker->exiting && slots->asked < worker->nnodes) {
        node = worker->nodes[slots->ask_next++ % worker->nnodes];
        slots->asked++;

        conn = ngx_http_throttle_redis_pick(node);
        if (conn == NULL) {
            continue;
        }

        argv[0] = "CLUSTER";
        argvlen[0] = 7;
        argv[1] = slots->shards ? "SHARDS" : "SLOTS";
        argvlen[1] = ngx_strlen(argv[1]);

        if (ngx_http_throttle_redis_conn_query(
                conn, 2, argv, argvlen,
                backend->connect_timeout + backend->timeout,
                ngx_http_throttle_redis_cluster_read, node))
        {
            return;
        }
    }

    if (!worker->exiting) {
        ngx_http_throttle_redis_log_error(worker, &backend->name,
                                          "no cluster node told its slots");
    }

    slots->refreshing = 0;
}

static void
ngx_http_throttle_redis_cluster_refresh(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_http_throttle_redis_slots_t *slots = &worker->slots;

    if (worker->exiting) {
        return;
    }

    /* and the next one in "cluster_refresh", unless asked sooner */
    ngx_add_timer(&slots->timer, worker->backend->cluster_refresh);

    if (slots->refreshing) {
        return;
    }

    slots->refreshing = 1;
    slots->started = ngx_current_msec;
    ngx_http_throttle_redis_count_slot_map_refresh(worker->backend->metrics);
    slots->asked = 0;
    slots->shards = 0;

    ngx_http_throttle_redis_cluster_ask(worker);
}

static void
ngx_http_throttle_redis_cluster_tick(ngx_event_t *ev) noexcept
{
    ngx_http_throttle_redis_cluster_refresh(
        (ngx_http_throttle_redis_worker_t *) ev->data);
}

void
ngx_http_throttle_redis_cluster_refresh_soon(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    ngx_http_throttle_redis_slots_t *slots = &worker->slots;
    ngx_msec_int_t                   wait;

    if (slots->refreshing || worker->exiting) {
        return;
    }

    wait =
        (ngx_msec_int_t) (slots->started + NGX_HTTP_THROTTLE_REDIS_REFRESH_GAP
                          - ngx_current_msec);

    if (wait <= 0 || slots->started == 0) {
        ngx_http_throttle_redis_cluster_refresh(worker);
        return;
    }

    if (!slots->timer.timer_set
        || (ngx_msec_int_t) (slots->timer.timer.key - ngx_current_msec) > wait)
    {
        ngx_add_timer(&slots->timer, (ngx_msec_t) wait);
    }
}

/* The map to fill, and its first reading at once. */
ngx_int_t
ngx_http_throttle_redis_slots_init(
    ngx_http_throttle_redis_worker_t *worker) noexcept
{
    worker->slots.owner = (uint16_t *) ngx_calloc(
        throttle::kClusterSlots * sizeof(uint16_t), worker->log);
    if (worker->slots.owner == NULL) {
        return NGX_ERROR;
    }

    worker->slots.timer.handler = ngx_http_throttle_redis_cluster_tick;
    worker->slots.timer.data = worker;
    worker->slots.timer.log = worker->log;
    /* a worker shutting down does not wait for the next refresh */
    worker->slots.timer.cancelable = 1;

    /* workers ask out of step */
    ngx_add_timer(&worker->slots.timer, 1 + (ngx_msec_t) ngx_random() % 10);

    return NGX_OK;
}
