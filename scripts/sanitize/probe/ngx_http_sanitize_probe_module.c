/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Bugs planted on purpose, for make sanitize to check that a report made
 * inside an nginx worker (running as nobody, with nginx's process title
 * over its environment) reaches the report directory with its stack:
 *
 *     a leak: every worker leaks a block when it starts (LeakSanitizer
 *         reports it when the worker exits);
 *     location /plant { sanitize_probe; }: a request there passes NULL to
 *         memcpy (UndefinedBehaviorSanitizer, which goes on), then writes
 *         past a heap block (AddressSanitizer, which ends the worker).
 *
 * The UBSan report comes first on purpose: libubsan starts at its first
 * report, and must not send AddressSanitizer's reports elsewhere when it
 * does.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

static char     *ngx_http_sanitize_probe(ngx_conf_t *cf, ngx_command_t *cmd,
                                         void *conf);
static ngx_int_t ngx_http_sanitize_probe_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_sanitize_probe_init_process(ngx_cycle_t *cycle);

static ngx_command_t ngx_http_sanitize_probe_commands[] = {

    {ngx_string("sanitize_probe"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
     ngx_http_sanitize_probe, 0, 0, NULL},

    ngx_null_command};

static ngx_http_module_t ngx_http_sanitize_probe_module_ctx = {
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

ngx_module_t ngx_http_sanitize_probe_module = {
    NGX_MODULE_V1,
    &ngx_http_sanitize_probe_module_ctx,
    ngx_http_sanitize_probe_commands,
    NGX_HTTP_MODULE,
    NULL,
    NULL,
    ngx_http_sanitize_probe_init_process,
    NULL,
    NULL,
    NULL,
    NULL,
    NGX_MODULE_V1_PADDING};

/* volatile: the compiler must not see the NULL and the sizes, or it warns
 * at build time and may drop the bad accesses */
static u_char *volatile ngx_http_sanitize_probe_null;
static volatile size_t ngx_http_sanitize_probe_nothing = 0;
static volatile size_t ngx_http_sanitize_probe_size = 16;

static char *
ngx_http_sanitize_probe(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_sanitize_probe_handler;

    return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_sanitize_probe_handler(ngx_http_request_t *r)
{
    u_char copy[1], *block;
    size_t size;

    ngx_memcpy(copy, ngx_http_sanitize_probe_null,
               ngx_http_sanitize_probe_nothing);

    size = ngx_http_sanitize_probe_size;

    block = ngx_alloc(size, r->connection->log);
    if (block == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    block[size] = '!';

    ngx_free(block);

    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}

/* The only pointer to the block is dropped on return: a leak. */
static ngx_int_t
ngx_http_sanitize_probe_init_process(ngx_cycle_t *cycle)
{
    return ngx_alloc(ngx_http_sanitize_probe_size, cycle->log) ? NGX_OK
                                                               : NGX_ERROR;
}
