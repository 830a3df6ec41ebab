# vramtrace: `make` builds build/libvramtrace.so and build/vramtrace.
# `make test` runs every suite on the simulated GPU; `make demo` runs the
# main scenario under the shim and prints its report.
#
# Each directory owns a fragment (preload/preload.mk, analyzer/analyzer.mk,
# tests/sim/sim.mk, tests/tests.mk, examples/examples.mk); this file holds
# only what they share.

CUDA_HOME ?= /usr/local/cuda
PREFIX ?= /usr/local
DESTDIR ?=
# A sanitized build gets its own tree (build-address-undefined, build-thread):
# objects do not record the flags they were built with, so sharing build/
# would mix instrumented and plain objects.
comma := ,
B := build$(if $(SANITIZE),-$(subst $(comma),-,$(SANITIZE)))
VERSION := 0.1.0

CC ?= cc
OPT ?= -O2
# SANITIZE=address,undefined or SANITIZE=thread builds everything instrumented.
SANITIZE ?=
SANFLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
WARN := -Wall -Wextra -Werror -Wshadow -Wno-missing-field-initializers
CPPFLAGS_COMMON := -Iinclude -I$(CUDA_HOME)/include -DVT_VERSION='"$(VERSION)"' -D_GNU_SOURCE
CFLAGS_COMMON := -std=gnu11 $(OPT) -g $(WARN) $(SANFLAGS) -fno-omit-frame-pointer
LDFLAGS_COMMON := $(SANFLAGS)
# Test programs compiled and linked in one step from one source keep their
# dependency file beside them (tests/tests.mk includes them all); objects
# use -MMD -MP in their own fragments.
PROG_DEPFLAGS = -MMD -MP -MF $@.d -MT $@

.PHONY: all test demo demo-bins demo-run bench fuzz clean install deps
all: $(B)/.deps-ok

# The README's first command. The build is quiet (errors still show) so the
# report's verdict lands on the first screen.
demo: $(B)/.deps-ok
	@echo "demo: building vramtrace, the simulated GPU and the examples..."
	@$(MAKE) -s --no-print-directory demo-bins >/dev/null
	@$(MAKE) -s --no-print-directory demo-run

# Dependencies: installed with apt-get when run as root on Debian/Ubuntu,
# otherwise the one command to run is printed (scripts/deps.sh).
$(B)/.deps-ok: scripts/deps.sh
	@mkdir -p $(B)
	@CUDA_HOME=$(CUDA_HOME) sh scripts/deps.sh
	@touch $@
deps: $(B)/.deps-ok

# In this order: report.mk adds to ANALYZER_LIBS and to the fuzz binaries'
# FUZZ_LIBS before fuzz.mk sets them; every fragment adds to TEST_BINS
# before tests/tests.mk reads it. A missing fragment is an error, not a
# build with fewer targets.
include preload/preload.mk
include analyzer/analyzer.mk
include tests/sim/sim.mk
include examples/examples.mk
include tests/unit/python.mk tests/unit/report.mk tests/unit/symbols.mk tests/unit/unwind_fds.mk
include tests/bench/bench.mk
include tests/fuzz/fuzz.mk tests/fault/fault.mk
include tests/unit/gpu.mk
include tests/tests.mk

# PREFIX/DESTDIR as usual; the shim goes in lib/vramtrace/, where
# `vramtrace record` looks for it relative to its own binary.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/vramtrace \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/include/vramtrace
	install -m 0755 $(B)/vramtrace $(DESTDIR)$(PREFIX)/bin/vramtrace
	install -m 0755 $(B)/libvramtrace.so $(DESTDIR)$(PREFIX)/lib/vramtrace/libvramtrace.so
	install -m 0644 docs/vramtrace.1 $(DESTDIR)$(PREFIX)/share/man/man1/vramtrace.1
	install -m 0644 include/vramtrace/*.h $(DESTDIR)$(PREFIX)/include/vramtrace/

clean:
	rm -rf $(B)
