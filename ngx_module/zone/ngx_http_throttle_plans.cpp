/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Plans (docs/plans.md): a zone whose rate= or burst= is a variable reads
 * it per request, and the request is decided by a policy of its own, made
 * by the core from the zone's (throttle::make_plan()). This worker keeps
 * the policies it made last for the zone (throttle::PlanCache): a request
 * whose values it has seen costs the variables' evaluation and a few
 * bytes compared.
 */

#include "ngx_http_throttle_zone.h"

/* Where a request's values make no policy: the request gets
 * throttle_on_error's answer, and the log says why, once a second per zone
 * and worker. */
static void
ngx_http_throttle_plan_refused(ngx_http_request_t       *r,
                               ngx_http_throttle_zone_t *zone,
                               const char               *why) noexcept
{
    if (!ngx_http_throttle_log_due(&zone->plan_log, ngx_current_msec, 1000)) {
        return;
    }

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "throttle zone \"%V\": %s; the request gets "
                  "throttle_on_error's answer%s",
                  &zone->name, why,
                  zone->plan_log.suppressed ? " (and earlier ones, not logged)"
                                            : "");
    zone->plan_log.suppressed = 0;
}

/*
 * The request's policy in the zone: the zone's own where rate= and burst=
 * are constants; else the plan its variables' values make, copied into
 * *storage (the cache's may go to another request's values meanwhile). NULL
 * if they make none (logged), or a variable cannot be evaluated.
 */
const throttle::Policy *
ngx_http_throttle_plan(ngx_http_request_t *r, ngx_http_throttle_zone_t *zone,
                       throttle::Policy *storage) noexcept
{
    ngx_str_t         rate, burst;
    throttle::Message why;

    if (zone->plans == NULL) {
        return &zone->policy;
    }

    ngx_str_null(&rate);
    ngx_str_null(&burst);

    if ((zone->rate && ngx_http_throttle_value(r, zone->rate, &rate) != NGX_OK)
        || (zone->burst
            && ngx_http_throttle_value(r, zone->burst, &burst) != NGX_OK))
    {
        return NULL;
    }

    auto plan = zone->plans->find(
        zone->policy, {ngx_http_throttle_sv(rate), ngx_http_throttle_sv(burst)},
        why);

    if (!plan) {
        ngx_http_throttle_plan_refused(r, zone, plan.error);
        return NULL;
    }

    *storage = **plan.value;
    return storage;
}
