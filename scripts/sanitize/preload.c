/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Preloaded by make sanitize into what it checks (Debian's nginx, the unit
 * tests), after libasan and before libubsan:
 *
 *     LD_PRELOAD="libasan.so.8 sanitize_preload.so libubsan.so.1"
 *
 * Without it, reports made inside nginx's workers are lost:
 *
 * - The sanitizers read their options from /proc/self/environ. nginx
 *   writes its process title over that memory, and gives its workers an
 *   environment of its own. AddressSanitizer reads its options as nginx
 *   starts, but libubsan starts at its first report, inside a worker, and
 *   would find none. This object copies UBSAN_OPTIONS when it is loaded,
 *   and libubsan takes the copy from __ubsan_default_options (found here
 *   first, before libubsan's own).
 *
 * - Each runtime applies its log_path when it starts through
 *   __sanitizer_set_report_path, which both export: libubsan's call finds
 *   libasan's, so libubsan's log_path moves AddressSanitizer's reports
 *   (UBSAN_OPTIONS must name the same log_path as ASAN_OPTIONS), and
 *   libubsan's own reports stay on stderr, which is nginx's error log. This
 *   object calls libubsan's own function with SANITIZE_UBSAN_LOG_PATH.
 *
 * - nginx unloads its modules when a process exits, before LeakSanitizer
 *   looks for leaks and names the functions that allocated them: a module's
 *   would be "<unknown module>". dlclose here leaves every library loaded
 *   until the process ends.
 *
 * The preloading stops at the process: its children (the redis-server of
 * the unit tests) run without it.
 */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char ubsan_options[4096];

static void
fail(const char *what)
{
    fprintf(stderr, "sanitize preload: %s\n", what);
    abort();
}

static void
keep_ubsan_options(void)
{
    const char *options = getenv("UBSAN_OPTIONS");

    if (options == NULL) {
        return;
    }

    if (strlen(options) >= sizeof(ubsan_options)) {
        fail("UBSAN_OPTIONS is too long");
    }

    strcpy(ubsan_options, options);
}

static void
set_ubsan_report_path(void)
{
    void *ubsan;
    void (*set_report_path)(const char *path);
    const char *path = getenv("SANITIZE_UBSAN_LOG_PATH");

    if (path == NULL || path[0] == '\0') {
        return;
    }

    ubsan = dlopen("libubsan.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (ubsan == NULL) {
        fail("libubsan.so.1 is not loaded");
    }

    /* the handle's own symbol, not the first one loaded (libasan's) */
    *(void **) &set_report_path = dlsym(ubsan, "__sanitizer_set_report_path");
    if (set_report_path == NULL) {
        fail("libubsan.so.1 has no __sanitizer_set_report_path");
    }

    set_report_path(path);
}

__attribute__((constructor)) static void
prepare(void)
{
    keep_ubsan_options();
    set_ubsan_report_path();
    unsetenv("LD_PRELOAD");
}

const char *
__ubsan_default_options(void)
{
    return ubsan_options;
}

int
dlclose(void *handle)
{
    (void) handle;
    return 0;
}
