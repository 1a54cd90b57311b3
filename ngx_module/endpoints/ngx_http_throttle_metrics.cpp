/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_metrics: the module's figures in Prometheus's text format
 * (version 0.0.4), for GET and HEAD.
 *
 *     location = /metrics {
 *         throttle_metrics;
 *     }
 *
 * Each zone keeps its figures in its shared memory
 * (ngx_http_throttle_metrics.h records them), so whichever worker answers
 * reports the whole nginx's. A scrape takes no lock: counters and gauges
 * are aligned 64-bit words, which x86_64 and arm64 read whole.
 *
 * The response is made of sections, each an upper bound of its size and
 * the writer of its text, in this order: build_info, then the zones'
 * families. A section for another kind of figures is one more pair in
 * ngx_http_throttle_metrics_sections.
 */

#include "ngx_http_throttle_endpoints.h"
#include "ngx_http_throttle_request.h"
#include "ngx_http_throttle_prometheus.h"

#include <algorithm>

/* Which zones a family has samples of. */
typedef enum {
    NGX_HTTP_THROTTLE_METRICS_ANY,
    NGX_HTTP_THROTTLE_METRICS_STRICT,
    NGX_HTTP_THROTTLE_METRICS_ASYNC,
    NGX_HTTP_THROTTLE_METRICS_PLACES /* concurrent= zones */
} ngx_http_throttle_metrics_zones_e;

/* One sample of a zone: its labels after zone=, and its value: a counter
 * of the zone's ngx_http_throttle_metrics_t (at an offset), or what a
 * gauge function computes. */
typedef struct {
    const char *labels;
    size_t      counter;
    int64_t (*gauge)(const ngx_http_throttle_zone_t *zone);
} ngx_http_throttle_metrics_sample_t;

#define NGX_HTTP_THROTTLE_COUNTER(labels, field)                               \
    {                                                                          \
        labels, offsetof(ngx_http_throttle_metrics_t, field), NULL             \
    }
/* nginx_throttle_requests_total's sample of a status: its label is the
 * core's (throttle::StatusInfo::label), checked at compile time. */
#define NGX_HTTP_THROTTLE_RESULT(status)                                       \
    NGX_HTTP_THROTTLE_COUNTER(",result=\"" #status "\"",                       \
                              requests[ngx_http_throttle_metrics_result(       \
                                  throttle::Status::status, #status)])
#define NGX_HTTP_THROTTLE_GAUGE(gauge)                                         \
    {                                                                          \
        "", 0, gauge                                                           \
    }

/* Called only where a sample's label is not the core's: not constexpr,
 * so the families' constant initializer does not compile. */
void ngx_http_throttle_metrics_label_is_not_the_cores() noexcept;

/* The counter of a status whose label is "label". */
static constexpr size_t
ngx_http_throttle_metrics_result(throttle::Status status,
                                 const char      *label) noexcept
{
    return throttle::status_info(status).label == std::string_view(label)
        ? (size_t) status
        : (ngx_http_throttle_metrics_label_is_not_the_cores(), 0);
}

/* The most samples a family has for one zone. */
#define NGX_HTTP_THROTTLE_METRICS_SAMPLES 7

typedef struct {
    const char                       *name;
    const char                       *type;
    const char                       *help;
    ngx_http_throttle_metrics_zones_e zones;
    bool                              seconds; /* the values are in us */
    /* up to the first without labels */
    ngx_http_throttle_metrics_sample_t
        samples[NGX_HTTP_THROTTLE_METRICS_SAMPLES + 1];
} ngx_http_throttle_metrics_family_t;

/* What the sections report on: the configuration's zones, sorted by
 * name, and its Redis backends. */
typedef struct {
    ngx_http_throttle_zone_t **zones;
    ngx_uint_t                 nzones;
    ngx_array_t               *backends;
} ngx_http_throttle_metrics_scrape_t;

typedef struct {
    size_t (*size)(const ngx_http_throttle_metrics_scrape_t *scrape);
    u_char *(*write)(u_char *p, u_char *last,
                     const ngx_http_throttle_metrics_scrape_t *scrape);
} ngx_http_throttle_metrics_section_t;

static int64_t
ngx_http_throttle_metrics_keys(const ngx_http_throttle_zone_t *zone) noexcept
{
    return (int64_t) zone->sh->metrics.keys;
}

/* concurrent=: requests holding a place, of every worker of this nginx. */
static int64_t
ngx_http_throttle_metrics_in_flight(
    const ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_uint_t i;
    int64_t    sum = 0;

    for (i = 0; i < NGX_MAX_PROCESSES; i++) {
        sum += (ngx_atomic_int_t) zone->sh->in_flight[i];
    }

    return sum;
}

/* The slab pages in use: those of the pool's page array not free. */
static int64_t
ngx_http_throttle_metrics_bytes(const ngx_http_throttle_zone_t *zone) noexcept
{
    const ngx_slab_pool_t *pool = zone->shpool;
    ngx_uint_t             pages = (ngx_uint_t) (pool->last - pool->pages);

    return (int64_t) ((pages - pool->pfree) * ngx_pagesize);
}

static int64_t
ngx_http_throttle_metrics_size(const ngx_http_throttle_zone_t *zone) noexcept
{
    return (int64_t) zone->shm_zone->shm.size;
}

static int64_t
ngx_http_throttle_metrics_pending_units(
    const ngx_http_throttle_zone_t *zone) noexcept
{
    return zone->sh->metrics.pending_units;
}

/* How long ago the oldest unit Redis has not taken yet was charged. */
static int64_t
ngx_http_throttle_metrics_lag(const ngx_http_throttle_zone_t *zone) noexcept
{
    int64_t since = zone->sh->metrics.unsynced_since;

    return since ? ngx_max(zone->policy.now_us() - since, (int64_t) 0) : 0;
}

/* The zones' families, sorted by name. */
static constexpr ngx_http_throttle_metrics_family_t
    ngx_http_throttle_metrics_families[] = {
        {"nginx_throttle_denial_cache_hits_total",
         "counter",
         "Requests a strict zone rejected from its memory of Redis's "
         "rejections, without asking Redis.",
         NGX_HTTP_THROTTLE_METRICS_STRICT,
         false,
         {NGX_HTTP_THROTTLE_COUNTER("", denial_cache_hits)}},
        {"nginx_throttle_flight_waits_total",
         "counter",
         "Requests of a strict zone that waited for the answer to their "
         "key's script in flight from this nginx, rather than ask Redis "
         "at once.",
         NGX_HTTP_THROTTLE_METRICS_STRICT,
         false,
         {NGX_HTTP_THROTTLE_COUNTER("", flight_waits)}},
        {"nginx_throttle_in_flight",
         "gauge",
         "Requests in flight that hold a place in a concurrent= zone, "
         "admitted by this nginx.",
         NGX_HTTP_THROTTLE_METRICS_PLACES,
         false,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_in_flight)}},
        {"nginx_throttle_requests_total",
         "counter",
         "Requests a zone decided, by its own verdict: rejected are those "
         "it refused itself, delayed those its line held back.",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_RESULT(passed), NGX_HTTP_THROTTLE_RESULT(rejected),
          NGX_HTTP_THROTTLE_RESULT(rejected_dry_run),
          NGX_HTTP_THROTTLE_RESULT(error_allowed),
          NGX_HTTP_THROTTLE_RESULT(error_denied),
          NGX_HTTP_THROTTLE_RESULT(delayed),
          NGX_HTTP_THROTTLE_RESULT(delayed_dry_run)}},
        {"nginx_throttle_settles_total",
         "counter",
         "Requests whose settle= a zone applied when they ended, by how: "
         "charged more, given units back, even (as reserved); invalid: the "
         "value was not a count of units, the reservation stands; lost: "
         "the charge could not be kept.",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_COUNTER(",result=\"charged\"",
                                    settles[NGX_HTTP_THROTTLE_SETTLE_CHARGED]),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"refunded\"",
                                    settles[NGX_HTTP_THROTTLE_SETTLE_REFUNDED]),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"even\"",
                                    settles[NGX_HTTP_THROTTLE_SETTLE_EVEN]),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"invalid\"",
                                    settles[NGX_HTTP_THROTTLE_SETTLE_INVALID]),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"lost\"",
                                    settles[NGX_HTTP_THROTTLE_SETTLE_LOST])}},
        {"nginx_throttle_sync_keys_total",
         "counter",
         "Keys an async zone synced with Redis.",
         NGX_HTTP_THROTTLE_METRICS_ASYNC,
         false,
         {NGX_HTTP_THROTTLE_COUNTER("", sync_keys)}},
        {"nginx_throttle_sync_lag_seconds",
         "gauge",
         "Age of the oldest unit an async zone charged that Redis has not "
         "taken yet.",
         NGX_HTTP_THROTTLE_METRICS_ASYNC,
         true,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_lag)}},
        {"nginx_throttle_sync_lost_units_total",
         "counter",
         "Units an async zone charged and evicted before they were synced.",
         NGX_HTTP_THROTTLE_METRICS_ASYNC,
         false,
         {NGX_HTTP_THROTTLE_COUNTER("", sync_lost_units)}},
        {"nginx_throttle_sync_pending_units",
         "gauge",
         "Units an async zone charged and has not sent to Redis yet.",
         NGX_HTTP_THROTTLE_METRICS_ASYNC,
         false,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_pending_units)}},
        {"nginx_throttle_sync_runs_total",
         "counter",
         "Syncs of an async zone with Redis, by how they ended.",
         NGX_HTTP_THROTTLE_METRICS_ASYNC,
         false,
         {NGX_HTTP_THROTTLE_COUNTER(",result=\"ok\"", sync_ok),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"failed\"", sync_failed)}},
        {"nginx_throttle_units_total",
         "counter",
         "Units a zone charged (passed), or refused when it rejected a "
         "request itself (rejected).",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_COUNTER(",result=\"passed\"", units_passed),
          NGX_HTTP_THROTTLE_COUNTER(",result=\"rejected\"", units_rejected)}},
        {"nginx_throttle_zone_bytes",
         "gauge",
         "Bytes of a zone's shared memory in use (slab pages).",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_bytes)}},
        {"nginx_throttle_zone_evictions_total",
         "counter",
         "Keys removed from a full zone to make room, expired (drained) or "
         "still limited (live).",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_COUNTER(",state=\"drained\"", evicted_drained),
          NGX_HTTP_THROTTLE_COUNTER(",state=\"live\"", evicted_live)}},
        {"nginx_throttle_zone_keys",
         "gauge",
         "Keys a zone holds.",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_keys)}},
        {"nginx_throttle_zone_size_bytes",
         "gauge",
         "Size of a zone's shared memory.",
         NGX_HTTP_THROTTLE_METRICS_ANY,
         false,
         {NGX_HTTP_THROTTLE_GAUGE(ngx_http_throttle_metrics_size)}}};

static bool
ngx_http_throttle_metrics_has(const ngx_http_throttle_metrics_family_t *f,
                              const ngx_http_throttle_zone_t *zone) noexcept
{
    switch (f->zones) {
    case NGX_HTTP_THROTTLE_METRICS_STRICT:
        return ngx_http_throttle_strict(zone);
    case NGX_HTTP_THROTTLE_METRICS_ASYNC:
        return ngx_http_throttle_async(zone);
    case NGX_HTTP_THROTTLE_METRICS_PLACES:
        return zone->policy.holds_places();
    default:
        return true;
    }
}

static int64_t
ngx_http_throttle_metrics_value(const ngx_http_throttle_metrics_sample_t *s,
                                const ngx_http_throttle_zone_t *zone) noexcept
{
    if (s->gauge) {
        return s->gauge(zone);
    }

    return (int64_t)
        * (const ngx_atomic_t *) ((const u_char *) &zone->sh->metrics
                                  + s->counter);
}

#define NGX_HTTP_THROTTLE_BUILD_INFO "nginx_throttle_build_info"
#define NGX_HTTP_THROTTLE_BUILD_HELP "The module's version."

static size_t
ngx_http_throttle_metrics_build_size(
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    return ngx_http_throttle_prometheus_family_size(
               NGX_HTTP_THROTTLE_BUILD_INFO, "gauge",
               NGX_HTTP_THROTTLE_BUILD_HELP)
        + ngx_http_throttle_prometheus_sample_size(
               NGX_HTTP_THROTTLE_BUILD_INFO, "version",
               sizeof(NGX_HTTP_THROTTLE_VERSION) - 1, "");
}

static u_char *
ngx_http_throttle_metrics_build_write(
    u_char *p, u_char *last,
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    static const ngx_str_t version = ngx_string(NGX_HTTP_THROTTLE_VERSION);

    p = ngx_http_throttle_prometheus_family(
        p, last, NGX_HTTP_THROTTLE_BUILD_INFO, "gauge",
        NGX_HTTP_THROTTLE_BUILD_HELP);
    return ngx_http_throttle_prometheus_sample(
        p, last, NGX_HTTP_THROTTLE_BUILD_INFO, "version", &version, "", 1,
        false);
}

static size_t
ngx_http_throttle_metrics_zones_size(
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    size_t                                    size = 0;
    ngx_uint_t                                z;
    const ngx_http_throttle_metrics_sample_t *s;

    for (const auto &family : ngx_http_throttle_metrics_families) {
        size += ngx_http_throttle_prometheus_family_size(
            family.name, family.type, family.help);

        for (z = 0; z < scrape->nzones; z++) {
            for (s = family.samples; s->labels; s++) {
                size += ngx_http_throttle_prometheus_sample_size(
                    family.name, "zone", scrape->zones[z]->name.len, s->labels);
            }
        }
    }

    return size;
}

/* Each family once, with every zone's samples; a family no zone has is
 * left out. */
static u_char *
ngx_http_throttle_metrics_zones_write(
    u_char *p, u_char *last,
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    bool                                      started;
    ngx_uint_t                                z;
    const ngx_http_throttle_zone_t           *zone;
    const ngx_http_throttle_metrics_sample_t *s;

    for (const auto &family : ngx_http_throttle_metrics_families) {
        started = false;

        for (z = 0; z < scrape->nzones; z++) {
            zone = scrape->zones[z];

            if (!ngx_http_throttle_metrics_has(&family, zone)) {
                continue;
            }

            if (!started) {
                p = ngx_http_throttle_prometheus_family(
                    p, last, family.name, family.type, family.help);
                started = true;
            }

            for (s = family.samples; s->labels; s++) {
                p = ngx_http_throttle_prometheus_sample(
                    p, last, family.name, "zone", &zone->name, s->labels,
                    ngx_http_throttle_metrics_value(s, zone), family.seconds);
            }
        }
    }

    return p;
}

/* The backends' families (ngx_http_throttle_redis_metrics.cpp). */
static size_t
ngx_http_throttle_metrics_redis_size(
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    return ngx_http_throttle_redis_metrics_size(scrape->backends);
}

static u_char *
ngx_http_throttle_metrics_redis_write(
    u_char *p, u_char *last,
    const ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    return ngx_http_throttle_redis_metrics_write(p, last, scrape->backends);
}

static const ngx_http_throttle_metrics_section_t
    ngx_http_throttle_metrics_sections[] = {
        {ngx_http_throttle_metrics_build_size,
         ngx_http_throttle_metrics_build_write},
        {ngx_http_throttle_metrics_zones_size,
         ngx_http_throttle_metrics_zones_write},
        {ngx_http_throttle_metrics_redis_size,
         ngx_http_throttle_metrics_redis_write}};

/* The configuration's zones, sorted by name, in the request's pool. */
static ngx_int_t
ngx_http_throttle_metrics_scrape(
    ngx_http_request_t *r, ngx_http_throttle_metrics_scrape_t *scrape) noexcept
{
    ngx_http_throttle_main_conf_t *tmcf;

    tmcf = (ngx_http_throttle_main_conf_t *) ngx_http_get_module_main_conf(
        r, ngx_http_throttle_module);

    scrape->backends = &tmcf->redis;
    scrape->nzones = tmcf->zones.nelts;
    scrape->zones = (ngx_http_throttle_zone_t **) ngx_palloc(
        r->pool, (scrape->nzones + 1) * sizeof(ngx_http_throttle_zone_t *));
    if (scrape->zones == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(scrape->zones, tmcf->zones.elts,
               scrape->nzones * sizeof(ngx_http_throttle_zone_t *));

    std::sort(scrape->zones, scrape->zones + scrape->nzones,
              [](const ngx_http_throttle_zone_t *a,
                 const ngx_http_throttle_zone_t *b) {
                  return ngx_memn2cmp(a->name.data, b->name.data, a->name.len,
                                      b->name.len)
                      < 0;
              });

    return NGX_OK;
}

/* The whole text, in one buffer. */
static ngx_buf_t *
ngx_http_throttle_metrics_text(ngx_http_request_t *r) noexcept
{
    size_t                             size = 0;
    ngx_buf_t                         *b;
    ngx_http_throttle_metrics_scrape_t scrape;

    if (ngx_http_throttle_metrics_scrape(r, &scrape) != NGX_OK) {
        return NULL;
    }

    for (const auto &section : ngx_http_throttle_metrics_sections) {
        size += section.size(&scrape);
    }

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NULL;
    }

    for (const auto &section : ngx_http_throttle_metrics_sections) {
        b->last = section.write(b->last, b->end, &scrape);
    }

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    return b;
}

static ngx_int_t
ngx_http_throttle_metrics_handler(ngx_http_request_t *r) noexcept
{
    ngx_int_t  rc;
    ngx_buf_t *b;

    static ngx_str_t allow = ngx_string("Allow");
    static u_char    allowed[] = "GET, HEAD";

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        if (ngx_http_throttle_add_header(r, allow, allowed, sizeof(allowed) - 1)
            != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    b = ngx_http_throttle_metrics_text(r);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the version and charset Prometheus expects of the text format */
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = sizeof("text/plain") - 1;

    return ngx_http_throttle_send(r, NGX_HTTP_OK, b);
}

char *
ngx_http_throttle_metrics_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                    void *conf) noexcept
{
    ngx_http_core_loc_conf_t *clcf;

    clcf = (ngx_http_core_loc_conf_t *) ngx_http_conf_get_module_loc_conf(
        cf, ngx_http_core_module);

    if (clcf->handler == ngx_http_throttle_metrics_handler) {
        return (char *) "is duplicate";
    }

    clcf->handler = ngx_http_throttle_metrics_handler;

    return NGX_CONF_OK;
}
