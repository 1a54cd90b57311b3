/*
 * A Redis Cluster, as one worker sees it: the master of each of the 16384
 * slots, read with CLUSTER SLOTS (CLUSTER SHARDS where SLOTS fails) from
 * any node that answers, the configured ones included for ever. A script
 * goes to the master of its key's slot (every script's keys share one hash
 * tag: one slot). MOVED moves the slot at once and the command with it,
 * and the whole map is read again soon; ASK sends the command there once,
 * after ASKING. The map is read again every "cluster_refresh", after a
 * node fails, and after a MOVED, but never twice within a second.
 */

#include "ngx_http_throttle_redis_conn.h"

#include "ngx_http_throttle_params.h"

#include "throttle/cluster.hpp"

/* Refreshes of the map a MOVED or a failure asks for: one a second. */
#define NGX_HTTP_THROTTLE_REDIS_REFRESH_GAP 1000 /* ms */

/* Requests for a failed master's slots that ask another node where they
 * are now: one per this many ms. */
#define NGX_HTTP_THROTTLE_REDIS_PROBE_GAP 100

/* Nodes a worker keeps for a Cluster, those it was given included. */
#define NGX_HTTP_THROTTLE_REDIS_MAX_NODES 1024

static void ngx_http_throttle_redis_cluster_ask(
    ngx_http_throttle_redis_worker_t *worker) noexcept;

/* The node at the address a reply names, added if new; NULL if the
 * address cannot be used (logged) or out of memory. */
static ngx_http_throttle_redis_node_t *
ngx_http_throttle_redis_cluster_node(
    ngx_http_throttle_redis_worker_t *worker,
    const throttle::NodeAddress      &where,
    ngx_http_throttle_redis_node_t   *asker) noexcept
{
    ngx_uint_t     i;
    ngx_sockaddr_t sa;
    socklen_t      len;
    ngx_addr_t     addr;
    ngx_str_t      host;
    u_char         text[NGX_SOCKADDR_STRLEN];
    char           err[NGX_SOCKADDR_STRLEN + 128];

    if (!ngx_http_throttle_redis_parse_address(where, asker, &sa, &len)) {
        ngx_snprintf((u_char *) err, sizeof(err) - 1,
                     "a node is announced by name (\"%*s\"), not an "
                     "address: set cluster-preferred-endpoint-type ip%Z",
                     ngx_min(where.host.size(), (size_t) 64),
                     where.host.data());
        ngx_http_throttle_redis_log_error(worker, &asker->name, err);
        return NULL;
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
        ngx_http_throttle_redis_log_error(worker, &asker->name,
                                          "too many cluster nodes");
        return NULL;
    }

    addr.sockaddr = &sa.sockaddr;
    addr.socklen = len;
    host.data = text;
    host.len = ngx_sock_ntop(&sa.sockaddr, len, text, sizeof(text), 0);

    return ngx_http_throttle_redis_add_node(worker, &addr, &host, false);
}

static uint16_t
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
        ? throttle::read_cluster_shards(reply,
                                        ngx_http_throttle_redis_map_range, &map,
                                        worker->backend->tls)
        : throttle::read_cluster_slots(reply, ngx_http_throttle_redis_map_range,
                                       &map);

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
                                      ngx_str_t *key) noexcept
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

        /* it is gone: a replica may have taken its slots over, and a node
         * that knows says so (MOVED) before the next map does; one request
         * now and then asks one, the others get throttle_on_error */
        ngx_http_throttle_redis_cluster_refresh_soon(worker);

        if ((ngx_msec_int_t) (ngx_current_msec - node->probed_at)
            < NGX_HTTP_THROTTLE_REDIS_PROBE_GAP)
        {
            return node;
        }

        node->probed_at = ngx_current_msec;
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
    throttle::ErrorReply              error = throttle::read_error(text);
    ngx_http_throttle_redis_worker_t *worker = conn->node->worker;
    char                              err[256];

    switch (error.kind) {

    case throttle::ErrorKind::moved:
    case throttle::ErrorKind::ask:
        ngx_http_throttle_redis_redirect(conn, cmd, error, text);
        return true;

    case throttle::ErrorKind::readonly:
    case throttle::ErrorKind::loading:
    case throttle::ErrorKind::masterdown:
        /* the map is out of date: that node is no master (yet) */
        ngx_http_throttle_redis_cluster_refresh_soon(worker);
        break;

    case throttle::ErrorKind::tryagain:
    case throttle::ErrorKind::clusterdown:
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

/* The configured nodes (every address of each), the map to fill, and its
 * first reading at once. */
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
