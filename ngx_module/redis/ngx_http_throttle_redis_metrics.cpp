/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Redis backends' figures in shared memory (see
 * ngx_http_throttle_redis_metrics.h): the zone, a record per backend name,
 * and the histogram's buckets.
 */

#include "ngx_http_throttle_params.h"
#include "ngx_http_throttle_prometheus.h"
#include "ngx_http_throttle_redis_backend.h"
#include "ngx_http_throttle_redis_metrics.h"

/* Fixed, so that a reload finds the zone as it was and keeps what it
 * counted: a record is about 8.5 KiB (the per-worker connection counts),
 * and a page holds the zone's own bookkeeping. */
#define NGX_HTTP_THROTTLE_REDIS_METRICS_SIZE (1024 * 1024)

const int64_t ngx_http_throttle_redis_buckets_us[] = {
    100,   250,   500,    1000,   2500,   5000,   10000,
    25000, 50000, 100000, 250000, 500000, 1000000};

static_assert(sizeof(ngx_http_throttle_redis_buckets_us)
                      / sizeof(ngx_http_throttle_redis_buckets_us[0])
                  == NGX_HTTP_THROTTLE_REDIS_NBUCKETS,
              "one bound per bucket");

/* The zone's list of records, in its slab pool's data. */
typedef struct {
    ngx_http_throttle_redis_metrics_t *first;
} ngx_http_throttle_redis_metrics_sh_t;

static ngx_http_throttle_redis_metrics_t *
ngx_http_throttle_redis_metrics_find(ngx_slab_pool_t *shpool,
                                     ngx_http_throttle_redis_metrics_sh_t *sh,
                                     ngx_str_t *name) noexcept
{
    ngx_http_throttle_redis_metrics_t *m;

    for (m = sh->first; m; m = m->next) {
        if (ngx_http_throttle_str_eq(m->name, *name)) {
            return m;
        }
    }

    m = (ngx_http_throttle_redis_metrics_t *) ngx_slab_calloc(
        shpool, sizeof(ngx_http_throttle_redis_metrics_t) + name->len);
    if (m == NULL) {
        return NULL;
    }

    m->name.data = (u_char *) (m + 1);
    m->name.len = name->len;
    ngx_memcpy(m->name.data, name->data, name->len);

    m->next = sh->first;
    sh->first = m;

    return m;
}

/* At start and on every reload, in the master: each backend finds its
 * record, the one it had if the zone was kept. */
static ngx_int_t
ngx_http_throttle_redis_metrics_init(ngx_shm_zone_t *shm_zone,
                                     void           *data) noexcept
{
    ngx_uint_t                            i;
    ngx_array_t                          *backends;
    ngx_slab_pool_t                      *shpool;
    ngx_http_throttle_redis_t           **b;
    ngx_http_throttle_redis_metrics_sh_t *sh;

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    backends = (ngx_array_t *) shm_zone->data;

    if (data || shm_zone->shm.exists) {
        sh = (ngx_http_throttle_redis_metrics_sh_t *) shpool->data;

    } else {
        sh = (ngx_http_throttle_redis_metrics_sh_t *) ngx_slab_calloc(
            shpool, sizeof(ngx_http_throttle_redis_metrics_sh_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        shpool->data = sh;
    }

    b = (ngx_http_throttle_redis_t **) backends->elts;

    for (i = 0; i < backends->nelts; i++) {
        b[i]->metrics =
            ngx_http_throttle_redis_metrics_find(shpool, sh, &b[i]->name);

        if (b[i]->metrics == NULL) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "throttle: no room for the figures of "
                          "\"throttle_redis\" \"%V\" in \"%V\"",
                          &b[i]->name, &shm_zone->shm.name);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}

ngx_int_t
ngx_http_throttle_redis_metrics_zone(ngx_conf_t *cf, ngx_array_t *backends,
                                     void *tag) noexcept
{
    ngx_shm_zone_t  *shm_zone;
    static ngx_str_t name = ngx_string("ngx_http_throttle_redis_metrics");

    if (backends->nelts == 0) {
        return NGX_OK;
    }

    shm_zone = ngx_shared_memory_add(cf, &name,
                                     NGX_HTTP_THROTTLE_REDIS_METRICS_SIZE, tag);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    shm_zone->init = ngx_http_throttle_redis_metrics_init;
    shm_zone->data = backends;
    shm_zone->noreuse = 0;

    return NGX_OK;
}

void
ngx_http_throttle_redis_metrics_init_worker(
    ngx_http_throttle_redis_metrics_t *m) noexcept
{
    if (m) {
        m->connections[ngx_process_slot] = 0;
    }
}

void
ngx_http_throttle_redis_count_latency(ngx_http_throttle_redis_metrics_t *m,
                                      int64_t us) noexcept
{
    ngx_uint_t i;

    if (m == NULL) {
        return;
    }

    for (i = 0; i < NGX_HTTP_THROTTLE_REDIS_NBUCKETS; i++) {
        if (us <= ngx_http_throttle_redis_buckets_us[i]) {
            break;
        }
    }

    ngx_http_throttle_metrics_add(&m->latency[i], 1);
    ngx_http_throttle_metrics_add(&m->latency_sum_us, us);
}

/* The text of the backends' families, Prometheus's text format 0.0.4,
 * the families in the order of their names. */

static const char *ngx_http_throttle_redis_error_names[] = {
    "timeout", "connect", "tls",         "auth",     "reply",   "noscript",
    "moved",   "ask",     "clusterdown", "sentinel", "failover"};

static_assert(sizeof(ngx_http_throttle_redis_error_names)
                      / sizeof(ngx_http_throttle_redis_error_names[0])
                  == NGX_HTTP_THROTTLE_REDIS_NERRORS,
              "a name per kind");

/* What a backend reports: a single server meets no redirections,
 * sentinels or failovers. */
static ngx_uint_t
ngx_http_throttle_redis_error_kinds(ngx_http_throttle_redis_t *b) noexcept
{
    return b->topology == NGX_HTTP_THROTTLE_REDIS_SERVER
        ? NGX_HTTP_THROTTLE_REDIS_ERR_MOVED
        : NGX_HTTP_THROTTLE_REDIS_NERRORS;
}

#define NGX_HTTP_THROTTLE_REDIS_COMMANDS "nginx_throttle_redis_commands_total"
#define NGX_HTTP_THROTTLE_REDIS_CONNECTIONS "nginx_throttle_redis_connections"
#define NGX_HTTP_THROTTLE_REDIS_ERRORS "nginx_throttle_redis_errors_total"
#define NGX_HTTP_THROTTLE_REDIS_LATENCY "nginx_throttle_redis_latency_seconds"
#define NGX_HTTP_THROTTLE_REDIS_SLOT_MAP                                       \
    "nginx_throttle_redis_slot_map_refreshes_total"

/* The samples of a backend: commands, connections, an error count per
 * kind, the histogram's buckets, its sum and count, the slot map reads. */
#define NGX_HTTP_THROTTLE_REDIS_NSAMPLES                                       \
    (2 + NGX_HTTP_THROTTLE_REDIS_NERRORS + NGX_HTTP_THROTTLE_REDIS_NBUCKETS    \
     + 1 + 2 + 1)

size_t
ngx_http_throttle_redis_metrics_size(ngx_array_t *backends) noexcept
{
    ngx_uint_t                  i;
    size_t                      size = 0;
    ngx_http_throttle_redis_t **b =
        (ngx_http_throttle_redis_t **) backends->elts;

    /* the families' HELP and TYPE: each well under 256 bytes */
    size += 5 * 256;

    /* every sample as long as the longest: a bucket's name with its "le" */
    for (i = 0; i < backends->nelts; i++) {
        size += NGX_HTTP_THROTTLE_REDIS_NSAMPLES
            * ngx_http_throttle_prometheus_sample_size(
                    NGX_HTTP_THROTTLE_REDIS_SLOT_MAP, "backend", b[i]->name.len,
                    ",le=\"0.000000\",kind=\"clusterdown\"");
    }

    return size;
}

/* A backend's sample of a family; "extra" its other labels. */
static u_char *
ngx_http_throttle_redis_sample(u_char *p, u_char *last, const char *name,
                               ngx_http_throttle_redis_t *b, const char *extra,
                               int64_t number, bool seconds = false) noexcept
{
    return ngx_http_throttle_prometheus_sample(
        p, last, name, "backend", &b->name, extra, number, seconds);
}

static u_char *
ngx_http_throttle_redis_latency(u_char *p, u_char *last,
                                ngx_http_throttle_redis_t *b) noexcept
{
    ngx_uint_t i;
    int64_t    count = 0, us;
    u_char     le[32];

    for (i = 0; i <= NGX_HTTP_THROTTLE_REDIS_NBUCKETS; i++) {
        count += (int64_t) b->metrics->latency[i];

        if (i < NGX_HTTP_THROTTLE_REDIS_NBUCKETS) {
            us = ngx_http_throttle_redis_buckets_us[i];
            ngx_sprintf(le, ",le=\"%L.%06L\"%Z", us / 1000000, us % 1000000);

        } else {
            ngx_sprintf(le, ",le=\"+Inf\"%Z");
        }

        p = ngx_http_throttle_redis_sample(
            p, last, NGX_HTTP_THROTTLE_REDIS_LATENCY "_bucket", b,
            (const char *) le, count);
    }

    p = ngx_http_throttle_redis_sample(
        p, last, NGX_HTTP_THROTTLE_REDIS_LATENCY "_sum", b, "",
        (int64_t) b->metrics->latency_sum_us, true);

    return ngx_http_throttle_redis_sample(
        p, last, NGX_HTTP_THROTTLE_REDIS_LATENCY "_count", b, "", count);
}

/* Open now: the sum of the workers' counts. */
static int64_t
ngx_http_throttle_redis_connections(ngx_http_throttle_redis_t *b) noexcept
{
    ngx_uint_t slot;
    int64_t    open = 0;

    for (slot = 0; slot < NGX_MAX_PROCESSES; slot++) {
        open += (ngx_atomic_int_t) b->metrics->connections[slot];
    }

    return ngx_max(open, 0);
}

u_char *
ngx_http_throttle_redis_metrics_write(u_char *p, u_char *last,
                                      ngx_array_t *backends) noexcept
{
    ngx_uint_t                  i, k, clusters = 0;
    u_char                      kind[32];
    ngx_http_throttle_redis_t **b =
        (ngx_http_throttle_redis_t **) backends->elts;
    ngx_uint_t n = backends->nelts;

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_REDIS_COMMANDS, "counter",
        "Scripts sent to Redis (EVALSHA, and EVAL when Redis lacked one).");
    for (i = 0; i < n; i++) {
        p = ngx_http_throttle_redis_sample(p, last,
                                           NGX_HTTP_THROTTLE_REDIS_COMMANDS,
                                           b[i], "", b[i]->metrics->commands);
    }

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_REDIS_CONNECTIONS, "gauge",
        "Connections to Redis open now, all workers.");
    for (i = 0; i < n; i++) {
        p = ngx_http_throttle_redis_sample(
            p, last, NGX_HTTP_THROTTLE_REDIS_CONNECTIONS, b[i], "",
            ngx_http_throttle_redis_connections(b[i]));
    }

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_REDIS_ERRORS, "counter",
        "Errors met talking to Redis, by kind; each counts once, however "
        "many commands it failed.");
    for (i = 0; i < n; i++) {
        for (k = 0; k < ngx_http_throttle_redis_error_kinds(b[i]); k++) {
            ngx_sprintf(kind, ",kind=\"%s\"%Z",
                        ngx_http_throttle_redis_error_names[k]);
            p = ngx_http_throttle_redis_sample(
                p, last, NGX_HTTP_THROTTLE_REDIS_ERRORS, b[i],
                (const char *) kind, b[i]->metrics->errors[k]);
        }
    }

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_REDIS_LATENCY, "histogram",
        "Round trips of the scripts sent to Redis, from their write to "
        "their reply.");
    for (i = 0; i < n; i++) {
        p = ngx_http_throttle_redis_latency(p, last, b[i]);
        clusters += b[i]->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER;
    }

    if (clusters == 0) {
        return p; /* no Cluster backend, no slot map */
    }

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_REDIS_SLOT_MAP, "counter",
        "Reads of a Redis Cluster's slot map (CLUSTER SLOTS or SHARDS).");
    for (i = 0; i < n; i++) {
        if (b[i]->topology == NGX_HTTP_THROTTLE_REDIS_CLUSTER) {
            p = ngx_http_throttle_redis_sample(
                p, last, NGX_HTTP_THROTTLE_REDIS_SLOT_MAP, b[i], "",
                b[i]->metrics->slot_map_refreshes);
        }
    }

    return p;
}
