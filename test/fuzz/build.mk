# test/fuzz/: fuzz targets for every decoder of untrusted input (socket
# messages and HELLO, region mapping, ring contents, strings).
#
#   make fuzz          builds them with clang's libFuzzer (+ASan, UBSan) and
#                      runs each for FUZZ_SECONDS (default 30) from the seed
#                      corpus; new inputs go to $(O)/fuzz/work, a crash to
#                      $(O)/fuzz/artifacts (copy it into test/fuzz/corpus/
#                      TARGET/ with the fix: it is then a regression test)
#   make fuzz-seeds    rewrites the seed corpus from common/wire.h
#   make test          replays the corpus through each target, built with
#                      the ordinary compiler (test/e2e/t_fuzz_replay.sh)

FUZZ_TARGETS := message ring region demangle
FUZZ_SECONDS ?= 30
CLANG ?= clang
FUZZ_COLLECTOR := client ctl job ring record ingest heapagg blockmap demangle clock ptrmap stacktree store log cputime

# Replays, with the ordinary (or sanitizer) build.
FUZZ_REPLAY_OBJS := $(O)/obj/test/fuzz/driver.o \
	$(FUZZ_COLLECTOR:%=$(O)/obj/collector/%.o) $(SCHEMA_OBJS)
define fuzz_replay
$(O)/test/fuzz/replay_$(1): $(O)/obj/test/fuzz/fuzz_$(1).o $(FUZZ_REPLAY_OBJS)
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ -lsqlite3 -liberty -lm
TEST_PROGS += $(O)/test/fuzz/replay_$(1)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_replay,$(t))))

# libFuzzer binaries: everything compiled again with clang.
FUZZ_CFLAGS := -std=c11 -g -O1 -fno-omit-frame-pointer $(WARN) \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
$(O)/fuzz/obj/%.o: %.c
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(O)/fuzz/obj/gen/%.o: $(O)/gen/%.c
	$(call msg,CLANG,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(CPPFLAGS_BASE) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@
define fuzz_bin
$(O)/fuzz/fuzz_$(1): $(O)/fuzz/obj/test/fuzz/fuzz_$(1).o \
		$(FUZZ_COLLECTOR:%=$(O)/fuzz/obj/collector/%.o) $(O)/fuzz/obj/gen/schema_sql.o \
		$(O)/fuzz/obj/gen/schema_version.o
	$$(call msg,LD,$$@)
	$$(Q)$$(CLANG) -fsanitize=fuzzer,address,undefined -o $$@ $$^ -lsqlite3 -liberty -lm
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_bin,$(t))))

# Each target's longest useful input (ring: a whole region and its prefix).
FUZZ_MAX_LEN_ring := 20489
FUZZ_MAX_LEN_message := 8192
FUZZ_MAX_LEN_region := 4096
FUZZ_MAX_LEN_demangle := 9000

fuzz: $(FUZZ_TARGETS:%=$(O)/fuzz/fuzz_%)
	$(Q)set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(O)/fuzz/work/$$t $(O)/fuzz/artifacts; \
		echo "== fuzz_$$t: $(FUZZ_SECONDS) s"; \
		$(O)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 \
			-max_len=$(FUZZ_MAX_LEN_$$t) -print_final_stats=1 \
			-artifact_prefix=$(O)/fuzz/artifacts/$$t- \
			$(O)/fuzz/work/$$t test/fuzz/corpus/$$t 2>&1 | \
			grep -E '^(Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)|INFO: Running|ERROR' || true; \
		if ls $(O)/fuzz/artifacts/$$t-* > /dev/null 2>&1; then \
			echo "fuzz_$$t: found a failing input:"; ls $(O)/fuzz/artifacts/$$t-*; exit 1; fi; \
	done; echo "fuzz: no failure in $(words $(FUZZ_TARGETS)) targets"

FUZZ_SEEDS := $(O)/test/fuzz/seeds
$(FUZZ_SEEDS): $(O)/obj/test/fuzz/seeds.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^
fuzz-seeds: $(FUZZ_SEEDS)
	$(Q)$(FUZZ_SEEDS) test/fuzz/corpus

.PHONY: fuzz fuzz-seeds
