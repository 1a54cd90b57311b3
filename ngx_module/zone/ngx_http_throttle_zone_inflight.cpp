/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A zone's keys whose requests are still out: a strict key's flight (the
 * one decision script in flight for it from this nginx, which the key's
 * other requests may wait for), and a concurrent= key's places, renewed
 * while their requests run. Each under the zone's lock, as in _zone.cpp.
 */

#include "ngx_http_throttle_zone.h"

/* Under the zone's lock, after a lookup: the check's request asks Redis,
 * and its script is the key's flight until `until` (when it will have
 * timed out), which the zone's other requests for the key may wait for.
 * A key the zone holds no node for has no flight: its requests all go. */
void
ngx_http_throttle_take_flight(ngx_http_throttle_lookup_t *check,
                              int64_t                     until) noexcept
{
    if (check->node) {
        check->zone->policy.take_flight(check->node->stored, until);
    }
}

/* The flight that ends at `until` is over: answered (and remembered), or
 * failed, or its request gone. */
void
ngx_http_throttle_land_flight(ngx_http_throttle_lookup_t *check,
                              int64_t                     until) noexcept
{
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->node) {
        zone->policy.land_flight(check->node->stored, until);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* concurrent=, local: the place a request of the check's key took or
 * last renewed at held_at lives on for another lease
 * (throttle::Policy::renew()); when to renew it from next, or -1 if its
 * lease had ended. */
int64_t
ngx_http_throttle_renew_key(ngx_http_throttle_lookup_t *check,
                            int64_t                     held_at) noexcept
{
    int64_t                   renewed = -1;
    ngx_http_throttle_node_t *tn;
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    tn = check->node;
    if (tn) {
        renewed = zone->policy.renew(tn->stored, ngx_http_throttle_node_log(tn),
                                     held_at, check->now);
        ngx_queue_remove(&tn->queue);
        ngx_queue_insert_head(&zone->sh->queue, &tn->queue);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return renewed;
}
