/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What every layer of the glue reads of the module: the module itself (its
 * index in nginx's tables), its version, and its configuration's shape.
 * ngx_http_throttle_module.cpp defines the module and wires the layers
 * into nginx; docs/architecture.md says what each folder holds.
 *
 * The glue is compiled as C++ by nginx's own build. nginx headers stay
 * inside extern "C"; every function nginx calls is noexcept, and nothing
 * stored in shared memory or pools has a destructor. The glue reaches the
 * algorithms only through a zone's throttle::Policy.
 */

#ifndef NGX_HTTP_THROTTLE_CONF_H
#define NGX_HTTP_THROTTLE_CONF_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

extern "C" ngx_module_t ngx_http_throttle_module;

/* The module's version: logged at each configuration load, reported by
 * throttle_metrics (build_info), and the upstream version of the Debian
 * package (debian/changelog; its build checks that they agree). */
#define NGX_HTTP_THROTTLE_VERSION "0.1.0"

/* When a "throttle" line decides (phase=): in the preaccess phase, as
 * limit_req, or once the access phase has let the request in (nginx's
 * precontent phase), when the key comes from authentication. */
#define NGX_HTTP_THROTTLE_PREACCESS 0
#define NGX_HTTP_THROTTLE_AUTHORIZED 1
#define NGX_HTTP_THROTTLE_NPHASES 2

/* throttle_headers */
#define NGX_HTTP_THROTTLE_HEADERS_OFF 0
#define NGX_HTTP_THROTTLE_HEADERS_ON 1
#define NGX_HTTP_THROTTLE_HEADERS_LEGACY 2

/* throttle_on_error */
#define NGX_HTTP_THROTTLE_ON_ERROR_ALLOW 0
#define NGX_HTTP_THROTTLE_ON_ERROR_DENY 1

/* Where a "throttle" or "throttle_api" line named a zone, to report one
 * never defined, or one that cannot take the delay=, cost= or settle=
 * asked of it. */
typedef struct {
    ngx_shm_zone_t *shm_zone;
    const char     *directive;
    int64_t         delay_units; /* throttle::kNoDelay: none */
    ngx_str_t       cost;        /* as given; empty if not */
    ngx_str_t       settle;
    ngx_str_t       file;
    ngx_uint_t      line;
} ngx_http_throttle_zone_ref_t;

typedef struct {
    ngx_array_t redis;      /* of ngx_http_throttle_redis_t *, defined */
    ngx_array_t zones;      /* of ngx_http_throttle_zone_t *, defined */
    ngx_array_t zone_refs;  /* of ngx_http_throttle_zone_ref_t, used */
    ngx_flag_t  authorized; /* a "throttle" line has phase=authorized */
    ngx_flag_t  settle;     /* a line has settle=, or a concurrent= zone */
    /* concurrent=: this worker's requests holding places, renewed by one
     * timer every renew_interval (0: no concurrent= zone) */
    ngx_queue_t places;
    ngx_event_t renew_timer;
    ngx_msec_t  renew_interval;
} ngx_http_throttle_main_conf_t;

typedef struct {
    /* of ngx_http_throttle_limit_t per phase, each sorted by zone name */
    ngx_array_t *limits[NGX_HTTP_THROTTLE_NPHASES];
    ngx_uint_t   status;
    ngx_uint_t   headers;
    ngx_flag_t   dry_run;
    ngx_uint_t   log_level;
    ngx_uint_t   on_error;
    /* throttle_api: the zones it may ask, of ngx_shm_zone_t *; not
     * inherited (the location's content handler) */
    ngx_array_t *api_zones;
    ngx_uint_t   api_reset; /* reset=on: a DELETE resets a key */
} ngx_http_throttle_loc_conf_t;

#endif /* NGX_HTTP_THROTTLE_CONF_H */
