# SPDX-License-Identifier: BSD-2-Clause
# ngx_http_throttle_module: build, demo, test and bench.
#
#   make demo    build, start two nginx with the module (127.0.0.1:8080 and
#                :8081 when free) and a redis-server of their own; show a
#                local zone, one limit shared by both nginx against
#                limit_req, and /metrics (make demo-stop stops them)
#   make test    install what is missing, build, run every test
#   make bench   throughput and latency with wrk, as ratios; writes
#                docs/performance.md
#   make accuracy  how exactly each mode holds a limit across two nginx;
#                writes docs/accuracy.md and docs/accuracy.png
#   make chaos   two nginx and Redis under load while Redis is stalled,
#                killed, flushed and filled and nginx reloaded and upgraded
#                (~1 minute); checks every answer, fails on a broken check;
#                writes the chaos section of docs/reliability.md
#   make soak    distinct keys at full speed into small zones for
#                SOAK_SECONDS (600); checks that memory stays flat; writes
#                the soak section of docs/reliability.md and docs/soak.png
#   make sanitize  every test again, on a core and module built with
#                AddressSanitizer and UBSan; fails on their reports
#   make fuzz    the libFuzzer targets of scripts/fuzz/, FUZZ_SECONDS (60)
#                each, FUZZ_JOBS (1) at a time
#   make delay-figure  a burst through delay= and limit_req's delay= side
#                by side; writes docs/delay.png
#   make deb     the Debian package libnginx-mod-http-throttle, into build/
#   make test-deb  (root; make test runs it as root) installs the package
#                into this machine's nginx, checks it, removes it
#   make install / uninstall  the module built from source, where the
#                package puts it (DESTDIR= for a staging tree)
#
# Each tool is a folder of scripts/: its entry script (run.sh; build.sh
# and test.sh for deb and test-deb), its templates and its report. What
# several tools share (deps.sh, which installs what a target needs, and
# the helpers the scripts source or import) is in scripts/lib/.

SHELL       := /bin/bash
NGINX_SRC   ?= /usr/share/nginx/src
NGINX_BIN   ?= /usr/sbin/nginx
BUILD       ?= $(CURDIR)/build
CORE_BUILD  := $(BUILD)/core
NGINX_BUILD := $(BUILD)/nginx
MODULE      := $(BUILD)/ngx_http_throttle_module.so
JOBS        ?= $(shell nproc)
TEST_JOBS   ?= 2

# What each target needs from Debian.
BUILD_DEPS  := build-essential cmake nginx nginx-dev libssl-dev libpcre2-dev \
               zlib1g-dev libhiredis-dev rapidjson-dev
TEST_DEPS   := $(BUILD_DEPS) googletest libgtest-dev perl libtest-base-perl \
               curl redis-server redis-tools openssl prometheus python3 wrk
DEMO_DEPS   := $(BUILD_DEPS) curl redis-server redis-tools python3
BENCH_DEPS  := $(BUILD_DEPS) wrk curl python3 redis-server redis-tools
ACCURACY_DEPS := $(BUILD_DEPS) python3 redis-server redis-tools gnuplot-nox
CHAOS_DEPS  := $(BUILD_DEPS) wrk curl python3 redis-server redis-tools procps
SOAK_DEPS   := $(CHAOS_DEPS) gnuplot-nox
SANITIZE_DEPS := $(TEST_DEPS) libasan8 libubsan1
FUZZ_DEPS   := cmake libssl-dev libhiredis-dev clang llvm libclang-rt-14-dev
DELAY_FIGURE_DEPS := $(BUILD_DEPS) perl curl python3 gnuplot-nox
DEB_DEPS    := dpkg-dev debhelper lintian
TEST_DEB_DEPS := $(DEB_DEPS) curl python3

CORE_SRCS   := $(wildcard src/throttle/*.cpp src/throttle/*.hpp src/scripts/*.lua \
               src/scripts/lib/*.lua \
               cmake/*.cmake) CMakeLists.txt
GLUE_SRCS   := $(wildcard ngx_module/*.cpp ngx_module/*/*.cpp ngx_module/*/*.h) config

# SANITIZE=1 (set by make sanitize, with BUILD=build/sanitize) builds with
# the sanitizers, and nginx's tree also builds the module of planted bugs.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer
NGX_CC_OPT  := -g -O2
NGX_ADDONS  := --add-dynamic-module=$(CURDIR)
ifdef SANITIZE
CMAKE_OPTS  := -DTHROTTLE_SANITIZE=ON
PROBE_CONF  := scripts/sanitize/probe/config
PROBE_SRCS  := $(wildcard scripts/sanitize/probe/*.c)
NGX_CC_OPT  += $(SANITIZE_FLAGS)
NGX_LD_OPT  := --with-ld-opt="$(SANITIZE_FLAGS)"
NGX_ADDONS  += --add-dynamic-module=$(CURDIR)/scripts/sanitize/probe
endif

# COUNTERS=0 (set by make bench, with BUILD=build/no-counters) compiles the
# throttle_metrics counters out (ngx_http_throttle_counter.h): the bench
# measures what they cost against that module.
ifeq ($(COUNTERS),0)
NGX_CC_OPT  += -DNGX_HTTP_THROTTLE_COUNTERS=0
endif

.PHONY: all build core deps test unit integration demo demo-stop bench accuracy \
        chaos soak sanitize sanitize-build fuzz delay-figure deb test-deb \
        install uninstall format clean

all: build

deps:
	@scripts/lib/deps.sh $(TEST_DEPS)

core: $(CORE_BUILD)/libthrottle_core.a

# CMake tracks the core's own dependencies; configure only once.
$(CORE_BUILD)/CMakeCache.txt:
	cmake -S . -B $(CORE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    $(CMAKE_OPTS) >/dev/null

# The module needs the library alone; make unit builds the unit tests.
$(CORE_BUILD)/libthrottle_core.a: $(CORE_SRCS) $(CORE_BUILD)/CMakeCache.txt
	cmake --build $(CORE_BUILD) -j $(JOBS) --target throttle_core
	@touch $@

# nginx's configure writes the list of glue files into its Makefile: a file
# added or removed configures again.
GLUE_LIST   := $(BUILD)/glue-files
GLUE_FILES  := $(sort $(wildcard ngx_module/* ngx_module/*/*))
$(shell mkdir -p $(BUILD) && { echo '$(GLUE_FILES)' | cmp -s - $(GLUE_LIST) \
        || echo '$(GLUE_FILES)' > $(GLUE_LIST); })

# nginx's build system, configured once like Debian's nginx (--with-compat).
$(NGINX_BUILD)/objs/Makefile: config $(GLUE_LIST) $(PROBE_CONF)
	rm -rf $(NGINX_BUILD)
	mkdir -p $(BUILD)
	cp -r $(NGINX_SRC) $(NGINX_BUILD)
	cd $(NGINX_BUILD) && . ./conf_flags && \
	    THROTTLE_CORE_BUILD=$(CORE_BUILD) ./configure "$${NGX_CONF_FLAGS[@]}" \
	    --with-cc-opt="$(NGX_CC_OPT)" $(NGX_LD_OPT) $(NGX_ADDONS) \
	    >$(BUILD)/configure.log 2>&1 \
	    || { tail -20 $(BUILD)/configure.log; exit 1; }

$(MODULE): $(CORE_BUILD)/libthrottle_core.a $(NGINX_BUILD)/objs/Makefile \
           $(GLUE_SRCS) $(PROBE_SRCS)
	rm -f $(NGINX_BUILD)/objs/ngx_http_throttle_module.so
	$(MAKE) -C $(NGINX_BUILD) -f objs/Makefile modules
	@# a new inode: running nginx processes keep the old file mapped
	cp $(NGINX_BUILD)/objs/ngx_http_throttle_module.so $@.tmp
	mv -f $@.tmp $@

build:
	@scripts/lib/deps.sh $(BUILD_DEPS)
	@$(MAKE) --no-print-directory $(MODULE)

unit: $(CORE_BUILD)/CMakeCache.txt
	cmake --build $(CORE_BUILD) -j $(JOBS)
	cd $(CORE_BUILD) && ctest --output-on-failure

# Two test files at a time: many of them mostly wait (for a window, a
# sync, a lease), and each picks its own ports.
integration: build
	TEST_NGINX_BINARY=$(NGINX_BIN) TEST_THROTTLE_MODULE=$(MODULE) \
	    prove --timer -j $(TEST_JOBS) -I t/lib t/*.t

test: deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@if [ "$$(id -u)" -eq 0 ]; then $(MAKE) --no-print-directory test-deb; \
	 else echo "test: test-deb skipped (it installs a package: run as root)"; fi

demo:
	@scripts/lib/deps.sh $(DEMO_DEPS)
	@$(MAKE) --no-print-directory build
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/demo/run.sh start

demo-stop:
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/demo/run.sh stop

# The rows whose Redis works hardest run twice: on CPUs shared with Redis,
# where Redis's own work is paid out of nginx's throughput (async with
# distinct keys: a write per key and sync, about one command a request;
# strict sliding_log: five calls on a large sorted set against GCRA's
# three; a 3-master cluster against one Redis), and with Redis on a CPU of
# its own, as on a host of its own.
# Each pass writes its own section of docs/performance.md.
REDIS_APART := throttle_pass_distinct async_pass_distinct strict_pass \
               strict_fixed_window_pass strict_sliding_window_pass \
               strict_sliding_log_pass strict_pass_distinct \
               cluster_strict_pass_distinct

# The module without counters has a build directory of its own (and
# shares the core, which has no counters): build/'s is untouched.
NO_COUNTERS_BUILD  := $(BUILD)/no-counters
NO_COUNTERS_MODULE := $(NO_COUNTERS_BUILD)/ngx_http_throttle_module.so

bench:
	@scripts/lib/deps.sh $(BENCH_DEPS)
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory BUILD=$(NO_COUNTERS_BUILD) \
	    CORE_BUILD=$(CORE_BUILD) COUNTERS=0 $(NO_COUNTERS_MODULE)
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) \
	    NO_COUNTERS_MODULE=$(NO_COUNTERS_MODULE) scripts/bench/run.sh
	@echo
	@echo "bench: the rows whose Redis works hardest again, with Redis on a CPU of its own"
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) BENCH_LAYOUT=redis-apart \
	    BENCH_DENSITY= BENCH_CONFIGS="$(REDIS_APART)" scripts/bench/run.sh

accuracy:
	@scripts/lib/deps.sh $(ACCURACY_DEPS)
	@$(MAKE) --no-print-directory build
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/accuracy/run.sh

chaos:
	@scripts/lib/deps.sh $(CHAOS_DEPS)
	@$(MAKE) --no-print-directory build
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/chaos/run.sh

soak:
	@scripts/lib/deps.sh $(SOAK_DEPS)
	@$(MAKE) --no-print-directory build
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/soak/run.sh

# The sanitized build has a directory of its own: make test's is untouched.
# sanitize-build is its part run with SANITIZE=1; scripts/sanitize/run.sh
# says how the tests run and what fails them.
SANITIZE_BUILD := $(BUILD)/sanitize

sanitize:
	@scripts/lib/deps.sh $(SANITIZE_DEPS)
	@$(MAKE) --no-print-directory BUILD=$(SANITIZE_BUILD) SANITIZE=1 \
	    sanitize-build
	@BUILD=$(SANITIZE_BUILD) NGINX_BIN=$(NGINX_BIN) scripts/sanitize/run.sh

sanitize-build: $(MODULE) $(BUILD)/sanitize_preload.so
	cmake --build $(CORE_BUILD) -j $(JOBS)

$(BUILD)/sanitize_preload.so: scripts/sanitize/preload.c
	$(CC) -shared -fPIC -O2 -Wall -Wextra -Werror -o $@ $< -ldl

# The core and the fuzz targets built by clang with libFuzzer, ASan and
# UBSan, apart from the gcc build.
FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 1

fuzz:
	@scripts/lib/deps.sh $(FUZZ_DEPS)
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=clang++ \
	    -DTHROTTLE_TESTS=OFF -DTHROTTLE_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(FUZZ_JOBS) scripts/fuzz/run.sh $(FUZZ_BUILD)

delay-figure:
	@scripts/lib/deps.sh $(DELAY_FIGURE_DEPS)
	@$(MAKE) --no-print-directory build
	@NGINX_BIN=$(NGINX_BIN) MODULE=$(MODULE) scripts/delay/run.sh

# The Debian package (docs/packaging.md), built by scripts/deb/build.sh from
# a copy of these files; its version is debian/changelog's.
PACKAGE_FILES := CMakeLists.txt config cmake src ngx_module conf README.md \
                 LICENSE docs debian
DEB_NAME    := libnginx-mod-http-throttle
DEB_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
DEB         := $(BUILD)/$(DEB_NAME)_$(DEB_VERSION)_$(shell dpkg --print-architecture).deb

deb:
	@scripts/lib/deps.sh $(DEB_DEPS)
	@$(MAKE) --no-print-directory $(DEB)

$(DEB): $(shell find $(PACKAGE_FILES) -type f)
	@BUILD=$(BUILD) scripts/deb/build.sh $(PACKAGE_FILES)

test-deb:
	@scripts/lib/deps.sh $(TEST_DEB_DEPS)
	@$(MAKE) --no-print-directory $(DEB)
	@DEB=$(DEB) MAKE="$(MAKE)" scripts/deb/test.sh

# Where the package puts the module, its load file, and the link that
# Debian's nginx.conf loads it by (include modules-enabled/*.conf).
MODULES_DIR    := /usr/lib/nginx/modules
MODULE_LOAD    := /usr/share/nginx/modules-available/mod-http-throttle.conf
MODULE_ENABLED := /etc/nginx/modules-enabled/50-mod-http-throttle.conf

# Into the system itself, they would be the package's files: refused while
# it is installed.
define refuse_over_package
	@if [ -z "$(DESTDIR)" ] && dpkg-query -W -f='$${Status}' $(DEB_NAME) \
	        2>/dev/null | grep -q 'ok installed'; then \
	    echo "$@: the package $(DEB_NAME) is installed (apt-get purge $(DEB_NAME))" >&2; \
	    exit 1; \
	fi
endef

install: build
	$(refuse_over_package)
	install -D -m 644 $(MODULE) $(DESTDIR)$(MODULES_DIR)/ngx_http_throttle_module.so
	install -d $(DESTDIR)$(dir $(MODULE_LOAD)) $(DESTDIR)$(dir $(MODULE_ENABLED))
	echo 'load_module modules/ngx_http_throttle_module.so;' > $(DESTDIR)$(MODULE_LOAD)
	ln -sfn $(MODULE_LOAD) $(DESTDIR)$(MODULE_ENABLED)

uninstall:
	$(refuse_over_package)
	rm -f $(DESTDIR)$(MODULE_ENABLED) $(DESTDIR)$(MODULE_LOAD) \
	    $(DESTDIR)$(MODULES_DIR)/ngx_http_throttle_module.so

format:
	clang-format -i src/throttle/*.[ch]pp ngx_module/*.cpp ngx_module/*/*.cpp ngx_module/*/*.h \
	    t/unit/*.cpp t/unit/*.hpp scripts/fuzz/*.cpp scripts/fuzz/*.hpp \
	    scripts/sanitize/*.c scripts/sanitize/probe/*.c

clean:
	rm -rf $(BUILD)
