/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The lines of Prometheus's text format, for every section of a
 * throttle_metrics response (the zones', the Redis backends'): a family's
 * "# HELP" and "# TYPE", and a sample, name{label="value"extra} number
 * (microseconds written as seconds when "seconds"). A label's value is a
 * zone's or a backend's name, which needs no escaping
 * (throttle::valid_zone_name()). Each writes no further than "last"; the
 * _size functions give the most it writes.
 */

#ifndef NGX_HTTP_THROTTLE_PROMETHEUS_H
#define NGX_HTTP_THROTTLE_PROMETHEUS_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
}

size_t  ngx_http_throttle_prometheus_family_size(const char *name,
                                                 const char *type,
                                                 const char *help) noexcept;
u_char *ngx_http_throttle_prometheus_family(u_char *p, u_char *last,
                                            const char *name, const char *type,
                                            const char *help) noexcept;
size_t  ngx_http_throttle_prometheus_sample_size(const char *name,
                                                 const char *label,
                                                 size_t      value_len,
                                                 const char *extra) noexcept;
u_char *ngx_http_throttle_prometheus_sample(u_char *p, u_char *last,
                                            const char *name, const char *label,
                                            const ngx_str_t *value,
                                            const char *extra, int64_t number,
                                            bool seconds) noexcept;

#endif /* NGX_HTTP_THROTTLE_PROMETHEUS_H */
