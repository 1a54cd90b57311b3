/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A zone's keys whose requests are still out: a strict key's flight (the
 * one decision script in flight for it from this nginx, which the key's
 * other requests may wait for), and a concurrent= key's places, renewed
 * while their requests run. Each under the zone's lock, as in _zone.cpp.
 *
 * A key's slot has no word for its flight (a GCRA key keeps two: its
 * bound and its fence): the flights live apart, in a small array of the
 * zone's (throttle::FlightEntry), an entry per tag. Two keys whose tags
 * share an entry take it from each other; a key that lost its entry has
 * no flight, and its requests go to Redis, as they would without one.
 */

#include "ngx_http_throttle_zone.h"

/* The check's key's entry, or NULL (a zone without flights). */
static throttle::FlightEntry *
ngx_http_throttle_flight_entry(const ngx_http_throttle_lookup_t *check) noexcept
{
    ngx_http_throttle_shctx_t *sh = check->zone->sh;

    if (sh->flights == NULL) {
        return NULL;
    }

    return &sh->flights[throttle::flight_index(check->tag, sh->nflights)];
}

/* Under the zone's lock, after a lookup: the key's flight, or 0. */
int64_t
ngx_http_throttle_flight_of(const ngx_http_throttle_lookup_t *check) noexcept
{
    const throttle::FlightEntry *e = ngx_http_throttle_flight_entry(check);

    return e ? throttle::flight_of(*e, check->tag) : 0;
}

/* Under the zone's lock, after a lookup: the check's request asks Redis,
 * and its script is the key's flight until `until` (when it will have
 * timed out), which the zone's other requests for the key may wait for.
 * It takes the key's entry from any other key's. */
void
ngx_http_throttle_take_flight(ngx_http_throttle_lookup_t *check,
                              int64_t                     until) noexcept
{
    int64_t                flight;
    throttle::FlightEntry *e = ngx_http_throttle_flight_entry(check);

    if (e == NULL) {
        return;
    }

    flight = check->zone->policy.take_flight(
        throttle::flight_of(*e, check->tag), until);
    if (flight) {
        e->tag = check->tag;
        e->until_us = flight;
    }
}

/* The flight that ends at `until` is over: answered (and remembered), or
 * failed (its mark stays), or its request gone. */
void
ngx_http_throttle_land_flight(ngx_http_throttle_lookup_t *check, int64_t until,
                              bool failed) noexcept
{
    throttle::FlightEntry    *e;
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    /* the tag is the lookup's, made when the request was decided */
    e = ngx_http_throttle_flight_entry(check);
    if (e && e->tag == check->tag) {
        e->until_us = zone->policy.land_flight(e->until_us, until, failed);
        if (e->until_us == 0) {
            e->tag = 0;
        }
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);
}

/* A zone's flights, made with it, or at a reload that makes it strict (in
 * the room its table left: fewer entries if need be, or none).
 * NGX_DECLINED: no room. */
ngx_int_t
ngx_http_throttle_flights_create(ngx_http_throttle_zone_t *zone,
                                 size_t                    zone_bytes) noexcept
{
    ngx_http_throttle_shctx_t *sh = zone->sh;
    size_t                     n = throttle::flight_entries(zone_bytes);

    for (/* void */; n >= 16; n /= 2) {
        sh->flights = (throttle::FlightEntry *) ngx_slab_calloc_locked(
            zone->shpool, n * sizeof(throttle::FlightEntry));
        if (sh->flights) {
            sh->nflights = n;
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}

/* A reload out of strict mode: no flight is in the air any more. */
void
ngx_http_throttle_flights_forget(ngx_http_throttle_zone_t *zone) noexcept
{
    ngx_http_throttle_shctx_t *sh = zone->sh;

    if (sh->flights) {
        ngx_memzero(sh->flights, sh->nflights * sizeof(throttle::FlightEntry));
    }
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
    throttle::StoredKey      *key;
    ngx_http_throttle_zone_t *zone = check->zone;

    ngx_shmtx_lock(&zone->shpool->mutex);

    check->now = zone->policy.now_us();
    ngx_http_throttle_find(check);

    if (check->stored
        && (key = ngx_http_throttle_table_take(check, ngx_cycle->log)))
    {
        renewed = zone->policy.renew(*key, check->log, held_at, check->now);
        ngx_http_throttle_table_put(check);
    }

    ngx_shmtx_unlock(&zone->shpool->mutex);

    return renewed;
}
