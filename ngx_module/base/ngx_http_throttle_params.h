/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The "name=value" arguments of throttle_zone, throttle and throttle_redis:
 * each directive has a table naming its parameters and the helper that
 * sets each one; ngx_http_throttle_parse_params() walks the arguments.
 */

#ifndef NGX_HTTP_THROTTLE_PARAMS_H
#define NGX_HTTP_THROTTLE_PARAMS_H

extern "C" {
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
}

#include <string_view>

typedef struct ngx_http_throttle_param_s ngx_http_throttle_param_t;

/* Sets one parameter into "conf": "arg" is the whole argument (for
 * messages), "value" what follows the name. NGX_CONF_OK or an error
 * already logged. */
typedef char *(*ngx_http_throttle_param_set_pt)(
    ngx_conf_t *cf, const ngx_http_throttle_param_t *param, ngx_str_t *arg,
    ngx_str_t *value, void *conf) noexcept;

struct ngx_http_throttle_param_s {
    /* "rate=" takes a value; a name without "=", such as "tls", is a
     * flag */
    const char                    *name;
    ngx_http_throttle_param_set_pt set;
    /* for the stock setters below: where in "conf" the value goes, and
     * what it may be (NULL: anything the setter reads) */
    size_t      offset;
    const void *post;
};

/* What ngx_http_throttle_param_number() and _msec() accept, and what to
 * say of a value out of range. */
typedef struct {
    ngx_int_t   min;
    ngx_int_t   max;
    const char *why;
} ngx_http_throttle_param_range_t;

/* What ngx_http_throttle_param_enum() accepts, and what to say of another
 * value. */
typedef struct {
    ngx_conf_enum_t *values; /* ended by an empty name */
    const char      *why;
} ngx_http_throttle_param_enum_t;

/* on (1) or off (0), for ngx_http_throttle_param_enum(). */
extern const ngx_http_throttle_param_enum_t ngx_http_throttle_param_on_off;

/* Stock setters: the value as it is (an ngx_str_t), a flag set to 1 (an
 * ngx_flag_t), a time (an ngx_msec_t: in a range, or at least 1ms), a
 * number in a range (an ngx_int_t), one of some names (an ngx_uint_t). */
char *ngx_http_throttle_param_str(ngx_conf_t                      *cf,
                                  const ngx_http_throttle_param_t *param,
                                  ngx_str_t *arg, ngx_str_t *value,
                                  void *conf) noexcept;
char *ngx_http_throttle_param_flag(ngx_conf_t                      *cf,
                                   const ngx_http_throttle_param_t *param,
                                   ngx_str_t *arg, ngx_str_t *value,
                                   void *conf) noexcept;
char *ngx_http_throttle_param_msec(ngx_conf_t                      *cf,
                                   const ngx_http_throttle_param_t *param,
                                   ngx_str_t *arg, ngx_str_t *value,
                                   void *conf) noexcept;
char *ngx_http_throttle_param_number(ngx_conf_t                      *cf,
                                     const ngx_http_throttle_param_t *param,
                                     ngx_str_t *arg, ngx_str_t *value,
                                     void *conf) noexcept;
char *ngx_http_throttle_param_enum(ngx_conf_t                      *cf,
                                   const ngx_http_throttle_param_t *param,
                                   ngx_str_t *arg, ngx_str_t *value,
                                   void *conf) noexcept;

/* Sets the directive's arguments from the "first" on with "params" (ended
 * by a NULL name); an argument that none names is refused. */
char *ngx_http_throttle_parse_params(ngx_conf_t *cf, ngx_uint_t first,
                                     const ngx_http_throttle_param_t *params,
                                     void *conf) noexcept;

/* Logs "invalid parameter "<arg>" in "<directive>": <why>" (just the
 * first part if "why" is NULL); returns NGX_CONF_ERROR. */
char *ngx_http_throttle_invalid(ngx_conf_t *cf, ngx_str_t *arg,
                                const char *why) noexcept;

/* A parameter's text with variables (a key, cost=, settle=, rate=,
 * burst=), evaluated per request. A text that is one variable alone
 * ("$name") is read as the variable is, without the copy a complex value
 * makes: a map's value costs what the map costs. */
typedef struct {
    ngx_http_complex_value_t cv;
    ngx_int_t                index; /* of the sole variable, or NGX_ERROR */
} ngx_http_throttle_value_t;

/* The text compiled; NULL on error (logged). */
ngx_http_throttle_value_t *
ngx_http_throttle_compile_value(ngx_conf_t *cf, ngx_str_t *text) noexcept;

/* The text's value for the request (a variable not found: empty). */
ngx_int_t ngx_http_throttle_value(ngx_http_request_t        *r,
                                  ngx_http_throttle_value_t *value,
                                  ngx_str_t                 *text) noexcept;

static inline std::string_view
ngx_http_throttle_sv(const ngx_str_t &s)
{
    return {(const char *) s.data, s.len};
}

static inline bool
ngx_http_throttle_str_eq(const ngx_str_t &a, const ngx_str_t &b)
{
    return a.len == b.len && ngx_strncmp(a.data, b.data, a.len) == 0;
}

/* The element of "array" (of pointers to structs with a "name") named
 * "name", or NULL: zones and Redis backends by name. */
template <typename T>
static inline T *
ngx_http_throttle_find_named(ngx_array_t *array, const ngx_str_t &name)
{
    T **elts = (T **) array->elts;

    for (ngx_uint_t i = 0; i < array->nelts; i++) {
        if (ngx_http_throttle_str_eq(elts[i]->name, name)) {
            return elts[i];
        }
    }

    return NULL;
}

#endif /* NGX_HTTP_THROTTLE_PARAMS_H */
