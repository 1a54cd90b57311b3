/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * throttle_api: a decision endpoint for application code.
 *
 *     location = /throttle {
 *         throttle_api zones=reply,login [reset=on];
 *         allow 10.0.0.0/8;
 *         deny all;
 *     }
 *
 *     GET /throttle?zone=reply&key=alice&cost=1
 *     POST /throttle  {"zone":"reply","key":"alice","cost":1}
 *                     {"checks":[{"zone":"reply","key":"alice"},...]}
 *     GET /throttle?zone=reply&key=alice&settle=3&reservation=...
 *     DELETE /throttle?zone=reply&key=alice     (reset=on)
 *     GET /throttle?zone=reply&top=10    (ngx_http_throttle_api_top.cpp)
 *
 * The caller names the zones and keys: each key is the one an HTTP request
 * of the same bytes has in the zone, so application code and nginx's own
 * "throttle" lines share one budget. The checks of a call are decided as a
 * location's lines are, by ngx_http_throttle_start_given(): all must pass,
 * and a rejected set is charged to none. The answer (200, or the
 * location's throttle_status) is JSON (ngx_http_throttle_api_json.cpp) and
 * carries the same fields as any limited response, through
 * ngx_http_throttle_answer().
 *
 * A strict zone waits for Redis without blocking: the handler keeps a
 * reference to the request (r->main->count) and the decision's resume
 * handler answers once every reply is in.
 */

#include "ngx_http_throttle_api.h"
#include "ngx_http_throttle_params.h"

#include <new>

static ngx_int_t ngx_http_throttle_api_handler(ngx_http_request_t *r) noexcept;

typedef struct {
    ngx_str_t  zones;
    ngx_uint_t reset;
} ngx_http_throttle_api_args_t;

static const ngx_http_throttle_param_t ngx_http_throttle_api_params[] = {
    {"zones=", ngx_http_throttle_param_str,
     offsetof(ngx_http_throttle_api_args_t, zones), NULL},
    {"reset=", ngx_http_throttle_param_enum,
     offsetof(ngx_http_throttle_api_args_t, reset),
     &ngx_http_throttle_param_on_off},
    {NULL, NULL, 0, NULL}};

/* The zone names of zones=, comma-separated: each once, each defined by a
 * throttle_zone (anywhere in http{}, checked once all is read). */
static char *
ngx_http_throttle_api_zones(ngx_conf_t *cf, ngx_array_t *zones, ngx_str_t *arg,
                            ngx_str_t *list) noexcept
{
    u_char          *p, *end, *comma;
    ngx_str_t        name;
    ngx_uint_t       i;
    ngx_shm_zone_t **shm_zone, **known;

    if (list->len == 0) {
        return ngx_http_throttle_invalid(cf, arg, "no zone is named");
    }

    p = list->data;
    end = list->data + list->len;

    for (;;) {
        comma = ngx_strlchr(p, end, ',');
        name.data = p;
        name.len = (comma ? comma : end) - p;

        if (name.len == 0) {
            return ngx_http_throttle_invalid(cf, arg, "a zone name is empty");
        }

        shm_zone = (ngx_shm_zone_t **) ngx_array_push(zones);
        if (shm_zone == NULL) {
            return (char *) NGX_CONF_ERROR;
        }

        *shm_zone =
            ngx_shared_memory_add(cf, &name, 0, &ngx_http_throttle_module);
        if (*shm_zone == NULL) {
            return (char *) NGX_CONF_ERROR;
        }

        known = (ngx_shm_zone_t **) zones->elts;

        for (i = 0; i + 1 < zones->nelts; i++) {
            if (known[i] == *shm_zone) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid parameter \"%V\" in "
                                   "\"throttle_api\": zone \"%V\" is named "
                                   "twice",
                                   arg, &name);
                return (char *) NGX_CONF_ERROR;
            }
        }

        if (ngx_http_throttle_zone_ref(cf, *shm_zone, "throttle_api") == NULL) {
            return (char *) NGX_CONF_ERROR;
        }

        if (comma == NULL) {
            return NGX_CONF_OK;
        }

        p = comma + 1;
    }
}

char *
ngx_http_throttle_api_directive(ngx_conf_t *cf, ngx_command_t *cmd,
                                void *conf) noexcept
{
    ngx_str_t                    *value = (ngx_str_t *) cf->args->elts;
    ngx_http_core_loc_conf_t     *clcf;
    ngx_http_throttle_api_args_t  args;
    ngx_http_throttle_loc_conf_t *tlcf = (ngx_http_throttle_loc_conf_t *) conf;

    if (tlcf->api_zones) {
        return (char *) "is duplicate";
    }

    ngx_str_null(&args.zones);
    args.reset = 0;

    if (ngx_http_throttle_parse_params(cf, 1, ngx_http_throttle_api_params,
                                       &args)
        != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    if (args.zones.data == NULL) {
        ngx_conf_log_error(
            NGX_LOG_EMERG, cf, 0,
            "\"throttle_api\" must have \"zones=name[,name...]\" "
            "parameter: the zones callers may ask");
        return (char *) NGX_CONF_ERROR;
    }

    tlcf->api_reset = args.reset;
    tlcf->api_zones = ngx_array_create(cf->pool, 2, sizeof(ngx_shm_zone_t *));
    if (tlcf->api_zones == NULL) {
        return (char *) NGX_CONF_ERROR;
    }

    if (ngx_http_throttle_api_zones(cf, tlcf->api_zones, &value[1], &args.zones)
        != NGX_CONF_OK)
    {
        return (char *) NGX_CONF_ERROR;
    }

    clcf = (ngx_http_core_loc_conf_t *) ngx_http_conf_get_module_loc_conf(
        cf, ngx_http_core_module);
    clcf->handler = ngx_http_throttle_api_handler;

    return NGX_CONF_OK;
}

/* The decision's answer: 200 when the checks are let through, else what a
 * request the location's lines refused would get (throttle_status). */
static ngx_int_t
ngx_http_throttle_api_reply(ngx_http_throttle_api_call_t *call,
                            ngx_http_throttle_ctx_t *ctx, ngx_int_t rc) noexcept
{
    ngx_str_t json;

    if (ngx_http_throttle_status(ctx) == throttle::Status::none) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR; /* it could not start */
    }

    if (ngx_http_throttle_api_answer(call, ctx, rc == NGX_DECLINED, &json)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_throttle_api_send(
        call->request, rc == NGX_DECLINED ? NGX_HTTP_OK : rc, &json);
}

/* Redis has answered every strict check (or failed within the backend's
 * timeout): the answer ends the request the handler kept. */
static void
ngx_http_throttle_api_resume(ngx_http_throttle_ctx_t *ctx) noexcept
{
    ngx_int_t                     rc;
    ngx_http_request_t           *r = ctx->request;
    ngx_connection_t             *c = r->connection;
    ngx_http_throttle_api_call_t *call =
        (ngx_http_throttle_api_call_t *) ctx->data;

    rc = ngx_http_throttle_complete(ctx);
    if (rc == NGX_AGAIN) {
        return; /* it waits again: for a flight's answer, or Redis's */
    }

    ctx->state = NGX_HTTP_THROTTLE_DONE;

    ngx_http_finalize_request(r, ngx_http_throttle_api_reply(call, ctx, rc));
    ngx_http_run_posted_requests(c);
}

/* Decides a call that was read whole; NGX_DONE while Redis answers. */
static ngx_int_t
ngx_http_throttle_api_decide(ngx_http_throttle_api_call_t *call) noexcept
{
    ngx_int_t                        rc;
    ngx_http_request_t              *r = call->request;
    ngx_http_throttle_ctx_t         *ctx;
    ngx_http_throttle_request_ctx_t *rctx;

    rctx = ngx_http_throttle_get_ctx(r);

    if (rctx == NULL) {
        rctx = ngx_http_throttle_create_ctx(r);
        if (rctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    ctx = new (&rctx->api) ngx_http_throttle_ctx_t();
    ctx->request = r;
    ctx->tlcf = call->tlcf;
    ctx->state = NGX_HTTP_THROTTLE_DONE;
    ctx->resume_handler = ngx_http_throttle_api_resume;
    ctx->data = call;

    rc = ngx_http_throttle_start_given(r, ctx, call->checks, call->nchecks);

    if (rc == NGX_AGAIN) {
        return NGX_DONE;
    }

    return ngx_http_throttle_api_reply(call, ctx, rc);
}

static ngx_http_throttle_api_call_t *
ngx_http_throttle_api_call(ngx_http_request_t *r) noexcept
{
    ngx_http_throttle_api_call_t *call;

    call = (ngx_http_throttle_api_call_t *) ngx_pcalloc(
        r->pool, sizeof(ngx_http_throttle_api_call_t));
    if (call == NULL) {
        return NULL;
    }

    call->request = r;
    call->tlcf = (ngx_http_throttle_loc_conf_t *) ngx_http_get_module_loc_conf(
        r, ngx_http_throttle_module);
    call->resets = r->method == NGX_HTTP_DELETE; /* only with reset=on */

    return call;
}

/* Decides (or settles) a call once it is read, or refuses it (400) when
 * "rc", how the reading went, says so. */
static ngx_int_t
ngx_http_throttle_api_run(ngx_http_throttle_api_call_t *call,
                          ngx_int_t                     rc) noexcept
{
    if (rc == NGX_DECLINED) {
        return ngx_http_throttle_api_send_error(
            call->request, NGX_HTTP_BAD_REQUEST, &call->error);
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (call->resets) {
        return ngx_http_throttle_api_reset(call);
    }

    return call->settles ? ngx_http_throttle_api_settle(call)
                         : ngx_http_throttle_api_decide(call);
}

#define NGX_HTTP_THROTTLE_API_STR(x) #x
#define NGX_HTTP_THROTTLE_API_XSTR(x) NGX_HTTP_THROTTLE_API_STR(x)

static ngx_str_t ngx_http_throttle_api_too_long =
    ngx_string("the body is longer than " NGX_HTTP_THROTTLE_API_XSTR(
        NGX_HTTP_THROTTLE_API_MAX_BODY) " bytes");

/*
 * The request body in one buffer: nginx keeps it in memory, or in a file
 * for the part beyond client_body_buffer_size. NGX_DECLINED when it is
 * longer than a call may be (a chunked body's length is known only now).
 */
static ngx_int_t
ngx_http_throttle_api_body(ngx_http_request_t *r, ngx_str_t *body) noexcept
{
    u_char      *p;
    off_t        size = 0;
    ssize_t      n;
    ngx_buf_t   *b;
    ngx_chain_t *cl, *bufs = r->request_body ? r->request_body->bufs : NULL;

    for (cl = bufs; cl; cl = cl->next) {
        size += ngx_buf_size(cl->buf);
    }

    if (size > NGX_HTTP_THROTTLE_API_MAX_BODY) {
        return NGX_DECLINED;
    }

    p = (u_char *) ngx_pnalloc(r->pool, size + 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    body->data = p;
    body->len = size;

    for (cl = bufs; cl; cl = cl->next) {
        b = cl->buf;
        size = ngx_buf_size(b);

        if (size == 0) {
            continue; /* the last buffer may be only a mark */
        }

        if (ngx_buf_in_memory(b)) {
            p = ngx_cpymem(p, b->pos, size);
            continue;
        }

        n = ngx_read_file(b->file, p, size, b->file_pos);
        if (n != size) {
            return NGX_ERROR;
        }

        p += n;
    }

    return NGX_OK;
}

/* The body has been read: a POST's call is decided. */
static void
ngx_http_throttle_api_body_read(ngx_http_request_t *r) noexcept
{
    ngx_int_t                     rc;
    ngx_str_t                     body;
    ngx_http_throttle_api_call_t *call;

    call = ngx_http_throttle_api_call(r);
    if (call == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    rc = ngx_http_throttle_api_body(r, &body);

    if (rc == NGX_DECLINED) {
        rc = ngx_http_throttle_api_send_error(r, NGX_HTTP_BAD_REQUEST,
                                              &ngx_http_throttle_api_too_long);

    } else {
        rc = ngx_http_throttle_api_run(
            call,
            rc == NGX_OK ? ngx_http_throttle_api_read_json(call, &body) : rc);
    }

    /* NGX_DONE: the resume handler finalizes the request */
    if (rc != NGX_DONE) {
        ngx_http_finalize_request(r, rc);
    }
}

/* Whether the body is said to be JSON: application/json, with or without
 * parameters (charset=utf-8). */
static bool
ngx_http_throttle_api_is_json(ngx_http_request_t *r) noexcept
{
    u_char           next;
    ngx_table_elt_t *h = r->headers_in.content_type;

    static ngx_str_t json = ngx_string("application/json");

    if (h == NULL || h->value.len < json.len
        || ngx_strncasecmp(h->value.data, json.data, json.len) != 0)
    {
        return false;
    }

    next = h->value.len > json.len ? h->value.data[json.len] : ';';

    return next == ';' || next == ' ' || next == '\t';
}

static ngx_int_t
ngx_http_throttle_api_post(ngx_http_request_t *r) noexcept
{
    ngx_int_t rc;

    static ngx_str_t not_json =
        ngx_string("Content-Type must be application/json");

    if (!ngx_http_throttle_api_is_json(r)) {
        return ngx_http_throttle_api_turn_away(r, NGX_HTTP_BAD_REQUEST,
                                               &not_json);
    }

    if (r->headers_in.content_length_n > NGX_HTTP_THROTTLE_API_MAX_BODY) {
        return ngx_http_throttle_api_turn_away(r, NGX_HTTP_BAD_REQUEST,
                                               &ngx_http_throttle_api_too_long);
    }

    rc = ngx_http_read_client_request_body(r, ngx_http_throttle_api_body_read);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}

static ngx_int_t
ngx_http_throttle_api_handler(ngx_http_request_t *r) noexcept
{
    ngx_int_t                     rc;
    ngx_http_throttle_api_call_t *call;

    /* the answer is kept in the main request's context, which a
     * subrequest would share */
    if (r != r->main) {
        return NGX_HTTP_FORBIDDEN;
    }

    /* a DELETE's key may come in a JSON body, read as a POST's */
    if (r->method == NGX_HTTP_POST || ngx_http_throttle_api_reset_body(r)) {
        return ngx_http_throttle_api_post(r);
    }

    if (!(r->method & ngx_http_throttle_api_methods(r))) {
        return ngx_http_throttle_api_not_allowed(r);
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    call = ngx_http_throttle_api_call(r);
    if (call == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* top=: reads a zone's most rejected keys, decides nothing */
    if (ngx_http_throttle_api_asks_top(&r->args)) {
        return ngx_http_throttle_api_top(call);
    }

    rc = ngx_http_throttle_api_run(call, ngx_http_throttle_api_read_args(call));

    /* the request waits for Redis: the resume handler finalizes it */
    if (rc == NGX_DONE) {
        r->main->count++;
    }

    return rc;
}
