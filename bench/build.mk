# bench/: benchmark programs; bench/run-bench runs them (make bench).
#
#   heap_bench   malloc+free pairs, timed inside the loop (bare, shim, heaptrack)
#   cuda_bench   CUDA runtime calls against the fake runtime from test/
#   stack_bench  malloc+free pairs at the bottom of a 32-deep call chain
#   heap_random  PAIRS random-size allocations and frees (exact-mode comparison)
#   e2e_driver   one shimmerd + N traced clients, wall and collector CPU time
#
# The workloads run under the shim, so they are built as $(O)/obj/prog/
# objects (never sanitized).  cuda_bench needs the fake CUDA runtime that
# test/build.mk builds; while test/fake_cudart/ has no sources it is left out
# and run-bench says so.

BENCH_CUDART_DIR := $(O)/test/fake_cudart
BENCH_CUDART := $(BENCH_CUDART_DIR)/libcudart.so.13

BENCH_PROGS += $(O)/bench/heap_bench $(O)/bench/e2e_driver $(O)/bench/stack_bench

$(O)/bench/heap_bench: $(O)/obj/prog/bench/heap_bench.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lm

# stack_bench: a 32-deep call chain making sampled allocations (stacks on/off)
$(O)/bench/stack_bench: $(O)/obj/prog/bench/stack_bench.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lpthread

$(O)/bench/e2e_driver: $(O)/obj/bench/e2e_driver.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^

ifneq ($(wildcard test/fake_cudart/*.c),)
BENCH_PROGS += $(O)/bench/cuda_bench

$(O)/bench/cuda_bench: $(O)/obj/prog/bench/cuda_bench.o $(BENCH_CUDART)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) -o $@ $(O)/obj/prog/bench/cuda_bench.o \
		-L$(BENCH_CUDART_DIR) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/../test/fake_cudart'
endif

# attach_bench: shimmer attach's process (run-bench section 6): the fake
# runtime and driver linked, and ATTACH_BENCH_LIBS small libraries to load
# (copies of one file, each its own mapping; no soname, so the loader keeps
# them apart by path).
ATTACH_BENCH_LIBS := 200
ATTACH_BENCH_LIBDIR := $(O)/bench/libs
BENCH_PROGS += $(O)/bench/attach_bench $(ATTACH_BENCH_LIBDIR)/.stamp

$(O)/bench/attach_bench: $(O)/obj/prog/bench/attach_bench.o $(FAKE_CUDART) $(FAKE_CUDA)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< -L$(FAKE_CUDART_DIR) -l:libcudart.so.13 \
		-L$(FAKE_CUDA_DIR) -lcuda -Wl,-rpath,'$$ORIGIN/../test/fake_cudart' \
		-Wl,-rpath,'$$ORIGIN/../test/fake_cuda' -Wl,--enable-new-dtags -ldl

$(ATTACH_BENCH_LIBDIR)/.stamp: $(O)/obj/prog/bench/attach_lib.o
	$(call msg,LD,$(ATTACH_BENCH_LIBDIR))
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $(@D)/libfill.so $<
	$(Q)for i in $$(seq -w 1 $(ATTACH_BENCH_LIBS)); do cp $(@D)/libfill.so $(@D)/libfill_$$i.so; done
	$(Q)rm -f $(@D)/libfill.so && touch $@

# gen_store: large stores written through the collector's store module, for
# the tools' benchmarks (run-bench, section 9)
BENCH_PROGS += $(O)/bench/gen_store

$(O)/bench/gen_store: $(O)/obj/bench/gen_store.o $(COLLECTOR_STORE_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -lm

# heap_random: the exact-mode comparison's workload (2 x PAIRS heap events)
BENCH_PROGS += $(O)/bench/heap_random
$(O)/bench/heap_random: $(O)/obj/prog/bench/heap_random.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

# sym_dump: every distinct pc of a store symbolized (RESULTS.md, "Symbolizing
# PyTorch-sized libraries"; two builds' answers diffed when
# tools/symbolize.c changes)
BENCH_PROGS += $(O)/bench/sym_dump
$(O)/bench/sym_dump: $(O)/obj/bench/sym_dump.o $(O)/obj/tools/symbolize.o $(O)/obj/tools/store.o \
		$(O)/gen/schema_version.o $(O)/obj/tools/map.o $(O)/obj/tools/cli.o \
		$(O)/obj/tools/fmt.o $(O)/obj/tools/symtab.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -ldw -lelf -lstdc++
