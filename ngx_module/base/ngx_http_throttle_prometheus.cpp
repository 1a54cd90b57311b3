/* SPDX-License-Identifier: BSD-2-Clause */
#include "ngx_http_throttle_prometheus.h"

size_t
ngx_http_throttle_prometheus_family_size(const char *name, const char *type,
                                         const char *help) noexcept
{
    return sizeof("# HELP  \n# TYPE  \n") - 1 + 2 * ngx_strlen(name)
        + ngx_strlen(help) + ngx_strlen(type);
}

u_char *
ngx_http_throttle_prometheus_family(u_char *p, u_char *last, const char *name,
                                    const char *type, const char *help) noexcept
{
    return ngx_slprintf(p, last, "# HELP %s %s\n# TYPE %s %s\n", name, help,
                        name, type);
}

size_t
ngx_http_throttle_prometheus_sample_size(const char *name, const char *label,
                                         size_t      value_len,
                                         const char *extra) noexcept
{
    /* the number signed and, in seconds, with six decimals */
    return ngx_strlen(name) + sizeof("{=\"\"} \n") - 1 + ngx_strlen(label)
        + value_len + ngx_strlen(extra) + NGX_INT64_LEN + sizeof(".000000") - 1;
}

u_char *
ngx_http_throttle_prometheus_sample(u_char *p, u_char *last, const char *name,
                                    const char *label, const ngx_str_t *value,
                                    const char *extra, int64_t number,
                                    bool seconds) noexcept
{
    p = ngx_slprintf(p, last, "%s{%s=\"%V\"%s} ", name, label, value, extra);

    if (seconds) {
        return ngx_slprintf(p, last, "%L.%06L\n", number / 1000000,
                            number % 1000000);
    }

    return ngx_slprintf(p, last, "%L\n", number);
}
