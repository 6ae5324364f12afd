# shimmer: one non-recursive Makefile.  Each component lists its sources in
# its own build.mk; everything is built under $(O) (default build/).
#
#   make               build/lib/libshimmer.so, build/bin/shimmerd, build/bin/shimmer
#   make test          unit (cmocka) and end-to-end tests
#   make bench         benchmarks (see bench/RESULTS.md)
#   make asan | tsan   the tests again under AddressSanitizer+UBSan / ThreadSanitizer
#   make fuzz          libFuzzer on every decoder of untrusted input (test/fuzz/)
#   make demo          install Debian packages, build, profile an example program
#   make install PREFIX=/usr/local [DESTDIR=...]   (make uninstall: the same paths)
#   V=1 for full command lines, O=dir to build elsewhere.

O ?= build
PREFIX ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
CC ?= cc
SANITIZE ?=

# The shim and the test fakes are built against the CUDA toolkit's headers
# (the runtime's and CUPTI's types); without them, say so once and stop.
CUDA_HEADER := $(CUDA_HOME)/include/cuda_runtime_api.h
ifeq ($(wildcard $(CUDA_HEADER)),)
ifneq ($(filter-out clean uninstall,$(or $(MAKECMDGOALS),all)),)
$(error CUDA toolkit headers not found: $(CUDA_HEADER) is missing; install the CUDA toolkit or name its directory with CUDA_HOME (make CUDA_HOME=/path/to/cuda))
endif
endif

CPPFLAGS_BASE := -D_GNU_SOURCE -I. -Icommon
WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Werror
CFLAGS_BASE := -std=c11 -g -O2 $(WARN) -fno-omit-frame-pointer
SAN_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-sanitize-recover=all,)

# The shim is never sanitized: a sanitizer runtime must be first in the
# process, and the shim lives in processes that do not have one.
SHIM_CFLAGS := $(CFLAGS_BASE) -fPIC -fvisibility=hidden -ftls-model=initial-exec $(EXTRA_CFLAGS)
ALL_CFLAGS := $(CFLAGS_BASE) $(SAN_FLAGS) $(EXTRA_CFLAGS)
ALL_LDFLAGS := $(SAN_FLAGS) $(LDFLAGS)

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2);
endif

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

LIB := $(O)/lib/libshimmer.so
SHIMMERD := $(O)/bin/shimmerd
SHIMMER := $(O)/bin/shimmer

# Filled in by the fragments.
UNIT_TESTS :=
TEST_PROGS :=
BENCH_PROGS :=

include common/build.mk
include preload/build.mk
include bpf/build.mk
include collector/build.mk
include tools/build.mk
include test/build.mk
include test/fuzz/build.mk
include bench/build.mk

all: $(LIB) $(SHIMMERD) $(SHIMMER)

# Object rules: the shim's objects are built position-independent and hidden.
$(O)/obj/preload/%.o: preload/%.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(SHIM_CFLAGS) -MMD -MP -c $< -o $@

$(O)/obj/pic/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(SHIM_CFLAGS) -MMD -MP -c $< -o $@

$(O)/obj/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(O)/gen/%.o: $(O)/gen/%.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS_BASE) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

test: all $(UNIT_TESTS) $(TEST_PROGS)
	$(Q)O=$(O) test/run-tests $(UNIT_TESTS)

bench: all $(BENCH_PROGS)
	$(Q)O=$(O) bench/run-bench

# Sanitizer builds keep their own tree so they never mix with the normal one.
asan:
	$(Q)$(MAKE) --no-print-directory O=$(O)/asan SANITIZE=address,undefined test
tsan:
	$(Q)$(MAKE) --no-print-directory O=$(O)/tsan SANITIZE=thread test

demo:
	$(Q)./.ci/install-deps
	$(Q)$(MAKE) --no-print-directory all $(O)/examples/heapdemo
	$(Q)O=$(O) test/demo

# Install paths.  The units and sysusers.d file go where systemd looks
# under PREFIX; the configuration file is /etc's whatever PREFIX (shimmerd,
# the shim and shimmer read /etc/shimmer/shimmerd.conf) and an existing one
# is kept.  After `make install`: systemd-sysusers; systemctl daemon-reload;
# systemctl enable --now shimmerd.socket (docs/service.md).
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share/shimmer
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
SYSCONFDIR ?= /etc

# shimmer report looks for Chart.js beside its bin/ (../share/shimmer: the
# build tree's, or an install with the default layout), then in DATADIR.
$(O)/obj/tools/report.o: ALL_CFLAGS += -DSHIMMER_DATADIR='"$(DATADIR)"'

SERVICE_UNIT := $(O)/dist/shimmerd.service
$(SERVICE_UNIT): dist/systemd/shimmerd.service.in FORCE
	$(Q)mkdir -p $(@D)
	$(Q)sed 's|@BINDIR@|$(BINDIR)|g' $< > $@.tmp && \
		if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

MAN_PAGES := man/shimmer.1 man/libshimmer.7 man/shimmerd.8

install: all $(SERVICE_UNIT)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(DATADIR)/schema $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/shimmer
	install -m 755 $(SHIMMERD) $(SHIMMER) $(DESTDIR)$(BINDIR)/
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 include/shimmer.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 schema/*.sql $(DESTDIR)$(DATADIR)/schema/
	@if [ -f $(O)/share/shimmer/chart.umd.min.js ]; then \
		install -m 644 $(O)/share/shimmer/chart.umd.min.js $(O)/share/shimmer/*.LICENSE.md \
			$(DESTDIR)$(DATADIR)/; \
	else \
		echo "install: $(O)/share/shimmer/chart.umd.min.js missing: shimmer report will not work (install npm, then make)" >&2; \
	fi
	install -m 644 man/shimmer.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 man/libshimmer.7 $(DESTDIR)$(MANDIR)/man7/
	install -m 644 man/shimmerd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 644 $(SERVICE_UNIT) dist/systemd/shimmerd.socket $(DESTDIR)$(UNITDIR)/
	install -m 644 dist/sysusers.d/shimmer.conf $(DESTDIR)$(SYSUSERSDIR)/
	install -d $(DESTDIR)$(DATADIR)/systemd
	install -m 644 dist/systemd/attach.conf $(DESTDIR)$(DATADIR)/systemd/
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf"; \
	else \
		echo "install -m 644 dist/shimmerd.conf $(DESTDIR)$(SYSCONFDIR)/shimmer/"; \
		install -m 644 dist/shimmerd.conf $(DESTDIR)$(SYSCONFDIR)/shimmer/; \
	fi

# Symmetric to install; the configuration file goes only when it is still
# the one install put there (an edited one is kept, and said so).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/shimmerd $(DESTDIR)$(BINDIR)/shimmer \
		$(DESTDIR)$(LIBDIR)/libshimmer.so $(DESTDIR)$(INCLUDEDIR)/shimmer.h \
		$(DESTDIR)$(MANDIR)/man1/shimmer.1 $(DESTDIR)$(MANDIR)/man7/libshimmer.7 \
		$(DESTDIR)$(MANDIR)/man8/shimmerd.8 $(DESTDIR)$(UNITDIR)/shimmerd.service \
		$(DESTDIR)$(UNITDIR)/shimmerd.socket $(DESTDIR)$(SYSUSERSDIR)/shimmer.conf
	rm -rf $(DESTDIR)$(DATADIR)
	@if cmp -s dist/shimmerd.conf $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf; \
		rmdir $(DESTDIR)$(SYSCONFDIR)/shimmer 2>/dev/null || true; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/shimmer/shimmerd.conf (edited)"; \
	fi

clean:
	rm -rf $(O)

.PHONY: all test bench asan tsan demo install uninstall clean FORCE
FORCE:

-include $(shell find $(O) -name '*.d' 2>/dev/null)
