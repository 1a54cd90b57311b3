/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the Redis transport: the types its files share. The rest of the
 * glue uses ngx_http_throttle_redis.h only. The files, from the bottom:
 *
 *   ngx_http_throttle_redis_node.cpp  a worker's nodes: adding them, their
 *                                     addresses, backing off, the log
 *   ngx_http_throttle_redis_tls.cpp   TLS: the context at configuration,
 *                                     the handshake and its checks
 *   ngx_http_throttle_redis_conn.cpp  one connection: connecting, writing,
 *                                     reading, timeouts, closing
 *   ngx_http_throttle_redis_cmd.cpp   the commands on a connection: written
 *                                     in RESP, answered in order
 *   ngx_http_throttle_redis_slots.cpp a Cluster's slot map and its
 *                                     refreshes
 *   ngx_http_throttle_redis_cluster.cpp  a Cluster: routing by slot, MOVED
 *                                     and ASK
 *   ngx_http_throttle_redis_sentinel.cpp  the master the sentinels name
 *   ngx_http_throttle_redis.cpp       the API: a backend per worker, which
 *                                     node a command goes to
 *   ngx_http_throttle_redis_conf.cpp  the "throttle_redis" directive
 *
 * Each calls only files listed before it; what goes the other way goes
 * through the events below.
 */

#ifndef NGX_HTTP_THROTTLE_REDIS_TYPES_H
#define NGX_HTTP_THROTTLE_REDIS_TYPES_H

#include "ngx_http_throttle_log.h"
#include "ngx_http_throttle_redis_backend.h"
#include "ngx_http_throttle_redis_metrics.h"

#include <hiredis/hiredis.h>

typedef enum {
    NGX_HTTP_THROTTLE_REDIS_CLOSED = 0,
    /* waiting for the sentinels to name the master it is to reach */
    NGX_HTTP_THROTTLE_REDIS_RESOLVING,
    NGX_HTTP_THROTTLE_REDIS_CONNECTING,
    NGX_HTTP_THROTTLE_REDIS_READY
} ngx_http_throttle_redis_state_e;

typedef struct ngx_http_throttle_redis_node_s ngx_http_throttle_redis_node_t;
typedef struct ngx_http_throttle_redis_conn_s ngx_http_throttle_redis_conn_t;

/*
 * What a connection and its commands hand up to the files above them,
 * one table per topology (ngx_http_throttle_redis.cpp): no file of the
 * transport calls one above it by name. NULL where a topology has no use
 * for it.
 */
typedef struct {
    /* a connection opens: its first commands (AUTH, SELECT, ROLE) */
    ngx_int_t (*setup)(ngx_http_throttle_redis_conn_t *conn) noexcept;
    /* the bytes from "from" on were written: their commands reached Redis */
    void (*written)(ngx_http_throttle_redis_conn_t *conn,
                    uint64_t                        from) noexcept;
    /* a reply was read; false if the connection is gone */
    bool (*reply)(ngx_http_throttle_redis_conn_t *conn,
                  redisReply                     *reply) noexcept;
    /* a connection to the master the sentinels name needs its address */
    void (*resolve)(ngx_http_throttle_redis_conn_t *conn) noexcept;
    /* an error reply that may send a script elsewhere (MOVED, ASK, a
     * master that is one no more); true if the command was taken care of */
    bool (*steer)(ngx_http_throttle_redis_conn_t *conn,
                  ngx_http_throttle_redis_cmd_t  *cmd,
                  redisReply                     *reply) noexcept;
    /* what the watched sentinel publishes */
    void (*news)(ngx_http_throttle_redis_conn_t *conn,
                 redisReply                     *reply) noexcept;
    /* a node failed: it may be gone for good, its slots elsewhere */
    void (*node_failed)(ngx_http_throttle_redis_worker_t *worker) noexcept;
} ngx_http_throttle_redis_events_t;

/* The longest host name a Cluster node announces: Redis takes fewer than
 * 256 characters. */
#define NGX_HTTP_THROTTLE_REDIS_NAME_LEN 255

struct ngx_http_throttle_redis_conn_s {
    ngx_http_throttle_redis_node_t *node;
    ngx_peer_connection_t           peer;
    ngx_uint_t                      state;
    ngx_event_t                     timer; /* the oldest command's deadline */
    redisReader                    *reader;
    ngx_queue_t                     awaiting; /* commands, in order */
    u_char                         *out;      /* to write */
    size_t                          out_pos;
    size_t                          out_len;
    size_t                          out_size;
    /* bytes ever queued and written on this connection: a command whose
     * end is written has reached Redis */
    uint64_t appended;
    uint64_t written;
    /* subscribed to a sentinel's news: replies to no command are those */
    unsigned watching : 1;
};

/* A server this worker talks to: the one Redis, a Cluster node, the master
 * the sentinels name, or a sentinel. Failures back off per node. */
struct ngx_http_throttle_redis_node_s {
    ngx_http_throttle_redis_worker_t *worker;
    ngx_str_t                         name;      /* host:port, for the log */
    ngx_str_t                         address;   /* IP address, no port */
    ngx_str_t                         host;      /* what a certificate is for */
    ngx_str_t                         announced; /* its name in a slot map */
    ngx_sockaddr_t                    sockaddr;
    socklen_t                         socklen;      /* 0: no address yet */
    unsigned                          sentinel : 1; /* asked, not used */
    ngx_http_throttle_redis_conn_t   *conns;
    ngx_uint_t                        nconns;
    ngx_uint_t                        next;     /* round robin over conns */
    ngx_uint_t                        failures; /* in a row */
    ngx_msec_t                        retry_at;
    u_char                            text[NGX_SOCKADDR_STRLEN + 1];
    u_char                            address_text[NGX_SOCKADDR_STRLEN];
    u_char announced_text[NGX_HTTP_THROTTLE_REDIS_NAME_LEN];
};

/* A Cluster's slot map, as this worker knows it. */
typedef struct {
    /* per slot: the index of its master in "nodes", plus one; 0: none */
    uint16_t   *owner;
    unsigned    loaded : 1;     /* some map was read */
    unsigned    refreshing : 1; /* a CLUSTER SLOTS is on its way */
    unsigned    shards : 1;     /* asking CLUSTER SHARDS, SLOTS failed */
    ngx_uint_t  asked;          /* nodes asked in this refresh */
    ngx_uint_t  ask_next;       /* the next node to ask */
    ngx_msec_t  started;        /* the last refresh's start */
    ngx_event_t timer;          /* the next refresh */
} ngx_http_throttle_redis_slots_t;

/* What the sentinels were asked, and what they said; and the connection
 * that hears from one of them when a master is replaced. */
typedef struct {
    unsigned   resolving : 1; /* a question is on its way */
    unsigned   unknown : 1;   /* a sentinel does not know the master */
    ngx_uint_t asked;         /* sentinels asked this time */
    ngx_http_throttle_redis_conn_t watch;
    ngx_uint_t                     watch_next; /* the sentinel to watch */
    ngx_event_t                    rewatch;    /* checks "watch" is there */
} ngx_http_throttle_redis_resolver_t;

struct ngx_http_throttle_redis_worker_s {
    ngx_http_throttle_redis_t *backend;
    /* data nodes: the server, the master, or the Cluster's nodes (those
     * configured first, kept for ever: a cluster whose every address has
     * changed is still found through them) */
    ngx_http_throttle_redis_node_t   **nodes;
    ngx_uint_t                         nnodes;
    ngx_uint_t                         next; /* a node to try, round robin */
    ngx_http_throttle_redis_node_t   **sentinels; /* who answered first */
    ngx_uint_t                         nsentinels;
    ngx_http_throttle_redis_slots_t    slots;
    ngx_http_throttle_redis_resolver_t resolver;
    ngx_http_throttle_log_limit_t      error_log;
    ngx_http_throttle_log_limit_t      sentinel_log;
    const ngx_http_throttle_redis_events_t *events; /* of its topology */
    ngx_log_t                              *log;
    unsigned                                exiting : 1;
};

/* What a command that is not a script is for. */
typedef enum {
    NGX_HTTP_THROTTLE_REDIS_SCRIPT = 0,
    NGX_HTTP_THROTTLE_REDIS_QUERY, /* its reply goes to "done" */
    /* on a new connection, before any script: an error closes it */
    NGX_HTTP_THROTTLE_REDIS_AUTH,
    NGX_HTTP_THROTTLE_REDIS_SELECT,
    NGX_HTTP_THROTTLE_REDIS_ROLE,  /* not a master: the sentinels are asked */
    NGX_HTTP_THROTTLE_REDIS_ASKING /* before a command an ASK sent here */
} ngx_http_throttle_redis_kind_e;

struct ngx_http_throttle_redis_cmd_s {
    ngx_queue_t                     queue;
    ngx_http_throttle_redis_done_pt done;
    void                           *data;
    ngx_msec_t                      deadline;
    ngx_msec_t                      timeout;
    ngx_uint_t                      kind;
    const throttle::Script         *script;
    uint64_t                        end; /* its last byte, in "appended" */
    int64_t                         written_us;      /* a script's, monotonic */
    unsigned                        sent_source : 1; /* as EVAL */
    unsigned                        sent : 1;  /* written, set on failure */
    ngx_uint_t                      redirects; /* MOVED and ASK followed */
    ngx_uint_t                      nkeys;
    ngx_uint_t                      nargs; /* keys and ARGV */
    ngx_str_t                       args[1];
};

/* Counts an error met on the connection, for throttle_metrics. */
static inline void
ngx_http_throttle_redis_conn_error(ngx_http_throttle_redis_conn_t *conn,
                                   ngx_http_throttle_redis_error_e kind)
{
    ngx_http_throttle_redis_count_error(conn->node->worker->backend->metrics,
                                        kind);
}

/* A command's end: its requester hears of it, unless it left. */
static inline void
ngx_http_throttle_redis_finish(ngx_http_throttle_redis_cmd_t *cmd,
                               redisReply *reply, const char *err, bool sent)
{
    if (cmd->done) {
        cmd->done(cmd->data, reply, err, sent);
    }

    ngx_free(cmd);
}

#endif /* NGX_HTTP_THROTTLE_REDIS_TYPES_H */
