#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Debian's nginx (SANITIZE_NGINX) with the sanitizer runtimes and
# preload.c's object preloaded (SANITIZE_PRELOAD): make sanitize names this
# script as the tests' nginx binary, so that nothing else they start (perl,
# redis-server, curl) runs with the runtimes.
exec env LD_PRELOAD="$SANITIZE_PRELOAD" "$SANITIZE_NGINX" "$@"
