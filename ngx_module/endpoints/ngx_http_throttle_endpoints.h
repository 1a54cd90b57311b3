/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The endpoints: throttle_metrics (Prometheus's scrapes) and throttle_api
 * (ngx_http_throttle_api.h, application code's checks).
 */

#ifndef NGX_HTTP_THROTTLE_ENDPOINTS_H
#define NGX_HTTP_THROTTLE_ENDPOINTS_H

#include "ngx_http_throttle_conf.h"

/* ngx_http_throttle_metrics.cpp */
char *ngx_http_throttle_metrics_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                          void *conf) noexcept;

/* ngx_http_throttle_api.cpp */
char *ngx_http_throttle_api_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                      void *conf) noexcept;

#endif /* NGX_HTTP_THROTTLE_ENDPOINTS_H */
