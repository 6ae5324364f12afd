# test/: unit tests (cmocka), the fake CUDA runtime and end-to-end workloads.
#
# Everything that runs under the shim (the fake runtime, the workloads, the
# example) uses the never-sanitized $(O)/obj/prog/ objects; the test client
# that speaks the wire format itself is an ordinary (sanitized) program.

FAKE_CUDART_DIR := $(O)/test/fake_cudart
FAKE_CUDART := $(FAKE_CUDART_DIR)/libcudart.so.13
FAKE_CUDART_OBJS := $(O)/obj/prog/test/fake_cudart/fake_cudart.o \
	$(O)/obj/prog/test/fake_cudart/fake_ptsz.o

$(FAKE_CUDART): $(FAKE_CUDART_OBJS) test/fake_cudart/libcudart.map
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $(FAKE_CUDART_OBJS) -Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=test/fake_cudart/libcudart.map -ldl -lpthread
	$(Q)ln -sf libcudart.so.13 $(FAKE_CUDART_DIR)/libcudart.so

# The fake CUPTI lives next to the fake runtime, where the shim looks for it.
FAKE_CUPTI := $(FAKE_CUDART_DIR)/libcupti.so.13
$(FAKE_CUPTI): $(O)/obj/prog/test/fake_cupti/fake_cupti.o test/fake_cupti/libcupti.map
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $< -Wl,-soname,libcupti.so.13 \
		-Wl,--version-script=test/fake_cupti/libcupti.map -ldl -lpthread

# $(call cuda_prog,OUTPUT,OBJECTS,RPATH[,LIBS]): a program linked against the
# fake runtime, found at run time through RPATH (relative to $ORIGIN).
define cuda_prog
$(1): $(2) $(FAKE_CUDART)
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) -o $$@ $(2) -L$(FAKE_CUDART_DIR) -lcudart '-Wl,-rpath,$$$$ORIGIN/$(3)' \
		-Wl,--enable-new-dtags $(4) -lpthread
endef

E2E_WL := $(O)/test/e2e/wl
E2E_WL_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl wlog wl_cuda_plain wl_cuda_ptsz)
$(eval $(call cuda_prog,$(E2E_WL),$(E2E_WL_OBJS),../fake_cudart))

# The GPU workload: CUPTI through the fakes, NVTX (header-only, dlopens its
# injection library).
E2E_WL_GPU := $(O)/test/e2e/wl_gpu
E2E_WL_GPU_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl_gpu wlog)
$(eval $(call cuda_prog,$(E2E_WL_GPU),$(E2E_WL_GPU_OBJS),../fake_cudart,-ldl))

# One rank of a training loop, for --by-rank (t_ranks.sh).
E2E_WL_RANKS := $(O)/test/e2e/wl_ranks
E2E_WL_RANKS_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl_ranks wlog)
$(eval $(call cuda_prog,$(E2E_WL_RANKS),$(E2E_WL_RANKS_OBJS),../fake_cudart))
TEST_PROGS += $(E2E_WL_RANKS)

# Marked up with include/shimmer.h (header only, nothing to link).
E2E_WL_API := $(O)/test/e2e/wl_api
E2E_WL_API_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl_api wlog)
$(eval $(call cuda_prog,$(E2E_WL_API),$(E2E_WL_API_OBJS),../fake_cudart))

# The service tests' workload: processes of one job, windows of recording.
E2E_WL_JOB := $(O)/test/e2e/wl_job
E2E_WL_JOB_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl_job wlog)
$(eval $(call cuda_prog,$(E2E_WL_JOB),$(E2E_WL_JOB_OBJS),../fake_cudart,-ldl))

HEAPDEMO := $(O)/examples/heapdemo
$(eval $(call cuda_prog,$(HEAPDEMO),$(O)/obj/prog/examples/heapdemo.o,../test/fake_cudart))

E2E_BADCLIENT := $(O)/test/e2e/badclient
$(E2E_BADCLIENT): $(O)/obj/test/e2e/badclient.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^

TEST_PROGS += $(FAKE_CUDART) $(FAKE_CUPTI) $(E2E_WL) $(E2E_WL_GPU) $(E2E_WL_API) $(E2E_BADCLIENT) $(HEAPDEMO) \
	$(E2E_WL_JOB)

# Programs whose call sites the leak, peak and temporary reports must name
# (issue 4): -O0 with frame pointers and full debug information, so that
# every planted allocation keeps its own line, and the inlined one is an
# inlined subroutine in DWARF.  Never sanitized, like the other prog objects.
$(O)/obj/prog-O0/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) \
		$(filter-out -O%,$(CFLAGS_BASE)) -O0 -g -fPIC $(EXTRA_CFLAGS) -MMD -MP -c $< -o $@

E2E_LEAKY := $(O)/test/e2e/leaky
E2E_LEAKY_OBJS := $(patsubst %,$(O)/obj/prog-O0/test/e2e/%.o,leaky leaky_lib) \
	$(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_LEAKY),$(E2E_LEAKY_OBJS),../fake_cudart))

E2E_LEAKSTEP := $(O)/test/e2e/leakstep
E2E_LEAKSTEP_OBJS := $(O)/obj/prog-O0/test/e2e/leakstep.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_LEAKSTEP),$(E2E_LEAKSTEP_OBJS),../fake_cudart))

E2E_LEAKLOOP := $(O)/test/e2e/leakloop
$(E2E_LEAKLOOP): $(O)/obj/prog-O0/test/e2e/leakloop.o $(O)/obj/prog/test/e2e/wlog.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^

# Planted lifetimes and sizes (t_histogram.sh).
E2E_LIFESPAN := $(O)/test/e2e/lifespan
E2E_LIFESPAN_OBJS := $(O)/obj/prog-O0/test/e2e/lifespan.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_LIFESPAN),$(E2E_LIFESPAN_OBJS),../fake_cudart))

# Call sites with planted differences between two runs (t_compare_sites.sh).
E2E_WL_SITES := $(O)/test/e2e/wl_sites
E2E_WL_SITES_OBJS := $(O)/obj/prog-O0/test/e2e/wl_sites.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_WL_SITES),$(E2E_WL_SITES_OBJS),../fake_cudart))

# Names with control characters in every place a traced process controls
# (t_hostile_names.sh): a call site, a thread, an NVTX range, a kernel.
E2E_WL_HOSTILE := $(O)/test/e2e/wl_hostile
E2E_WL_HOSTILE_OBJS := $(O)/obj/prog-O0/test/e2e/wl_hostile.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_WL_HOSTILE),$(E2E_WL_HOSTILE_OBJS),../fake_cudart,-ldl))
TEST_PROGS += $(E2E_WL_HOSTILE)

# 2^BITS distinct call stacks (t_stacks.sh).
E2E_MANYSTACKS := $(O)/test/e2e/manystacks
$(E2E_MANYSTACKS): $(O)/obj/prog-O0/test/e2e/manystacks.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^

# Non-PIE, with canonical PLT slots for malloc and free (t_exact.sh).
E2E_WL_NOPIE := $(O)/test/e2e/wl_nopie
$(E2E_WL_NOPIE): test/e2e/wl_nopie.c
	$(call msg,CCLD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -Werror -fno-pie -no-pie -o $@ $<
# The same defining the malloc family itself (t_exact.sh).
E2E_WL_OWNMALLOC := $(O)/test/e2e/wl_ownmalloc
$(E2E_WL_OWNMALLOC): test/e2e/wl_nopie.c
	$(call msg,CCLD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -g -Wall -Wextra -Werror -Wno-missing-prototypes -DOWN_MALLOC -o $@ $<

TEST_PROGS += $(E2E_LEAKY) $(E2E_LEAKSTEP) $(E2E_LEAKLOOP) $(E2E_LIFESPAN) $(E2E_WL_SITES) \
	$(E2E_MANYSTACKS) $(E2E_WL_NOPIE) $(E2E_WL_OWNMALLOC)

# The bottleneck workloads (t_bottlenecks.sh): -O0 with full debug
# information, so that each planted call keeps its own line.
E2E_WL_BNECK := $(O)/test/e2e/wl_bneck
E2E_WL_BNECK_OBJS := $(O)/obj/prog-O0/test/e2e/wl_bneck.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_WL_BNECK),$(E2E_WL_BNECK_OBJS),../fake_cudart))
TEST_PROGS += $(E2E_WL_BNECK)

# Figures of time known from the program's own clocks (t_truth.sh).
E2E_WL_CLOCK := $(O)/test/e2e/wl_clock
E2E_WL_CLOCK_OBJS := $(O)/obj/prog/test/e2e/wl_clock.o $(O)/obj/prog/test/e2e/wlog.o
$(eval $(call cuda_prog,$(E2E_WL_CLOCK),$(E2E_WL_CLOCK_OBJS),../fake_cudart))
TEST_PROGS += $(E2E_WL_CLOCK)

# Children that burn a known CPU time and end at once (t_cpuexit.sh).
E2E_WL_BURN := $(O)/test/e2e/wl_burn
$(E2E_WL_BURN): $(O)/obj/prog/test/e2e/wl_burn.o $(O)/obj/prog/test/e2e/wlog.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ -lpthread
TEST_PROGS += $(E2E_WL_BURN)

# pymalloc's arenas (t_pyarena.sh): a C program's maps of an arena's shape
# and a stand-in runtime it links, whose constructor maps arenas before the
# shim's; a program that loads libpython with dlopen.
E2E_LIBFAKEPY := $(O)/test/e2e/libfakepy.so
$(E2E_LIBFAKEPY): $(O)/obj/prog-O0/test/e2e/fakepy.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^

E2E_ANONMAPS := $(O)/test/e2e/anonmaps
$(E2E_ANONMAPS): $(O)/obj/prog-O0/test/e2e/anonmaps.o $(E2E_LIBFAKEPY)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< -L$(O)/test/e2e -lfakepy '-Wl,-rpath,$$ORIGIN' -Wl,--enable-new-dtags

E2E_PYEMBED := $(O)/test/e2e/pyembed
$(E2E_PYEMBED): $(O)/obj/prog/test/e2e/pyembed.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ -ldl

TEST_PROGS += $(E2E_LIBFAKEPY) $(E2E_ANONMAPS) $(E2E_PYEMBED)

# t_heapagg's 10-million-event run uses the benchmark's workload.
TEST_PROGS += $(O)/bench/heap_random

# shimmer attach's workload (t_attach.sh): commands on stdin, the fake
# runtime, and the fake driver (launch entry points only) next to it.
FAKE_CUDA_DIR := $(O)/test/fake_cuda
FAKE_CUDA := $(FAKE_CUDA_DIR)/libcuda.so.1
$(FAKE_CUDA): $(O)/obj/prog/test/fake_cuda/fake_cuda.o test/fake_cuda/libcuda.map
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $< -Wl,-soname,libcuda.so.1 \
		-Wl,--version-script=test/fake_cuda/libcuda.map
	$(Q)ln -sf libcuda.so.1 $(FAKE_CUDA_DIR)/libcuda.so

E2E_WL_ATTACH := $(O)/test/e2e/wl_attach
E2E_WL_ATTACH_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl_attach wlog wl_cuda_plain \
	wl_cuda_ptsz)
# ($$$$: the value goes through $(call) and $(eval) before the shell)
E2E_WL_ATTACH_LIBS = -L$(FAKE_CUDA_DIR) -lcuda '-Wl,-rpath,$$$$ORIGIN/../fake_cuda'
$(E2E_WL_ATTACH): $(FAKE_CUDA)
$(eval $(call cuda_prog,$(E2E_WL_ATTACH),$(E2E_WL_ATTACH_OBJS),../fake_cudart,$(E2E_WL_ATTACH_LIBS)))

TEST_PROGS += $(FAKE_CUDA) $(E2E_WL_ATTACH)

# Issue 13: workloads that try to break the shim from inside the program
# (wl_hard.c), a library for RTLD_DEEPBIND found through wl_hard's RUNPATH
# only, a library that allocates before the shim's constructor, and a C++
# program (libstdc++'s start-up allocation), and an allocator preloaded
# behind the shim that holds its calls open (order_lib.c, wl_hard order).
E2E_WL_HARD := $(O)/test/e2e/wl_hard
E2E_LIBHARD := $(O)/test/e2e/libhard.so
E2E_LIBORDER := $(O)/test/e2e/liborder.so
E2E_LIBEARLY := $(O)/test/e2e/libearly.so
E2E_LIBUNDER := $(O)/test/e2e/libunder.so
E2E_WL_EARLY := $(O)/test/e2e/wl_early
E2E_WL_CXX := $(O)/test/e2e/wl_cxx

$(E2E_WL_HARD): $(O)/obj/prog/test/e2e/wl_hard.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ '-Wl,-rpath,$$ORIGIN' -Wl,--enable-new-dtags -ldl -lpthread

$(E2E_LIBHARD): $(O)/obj/prog/test/e2e/hard_lib.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^

$(E2E_LIBORDER): $(O)/obj/prog/test/e2e/order_lib.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^ -lpthread

$(E2E_LIBUNDER): $(O)/obj/prog/test/e2e/under_lib.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^ -lpthread

$(E2E_LIBEARLY): $(O)/obj/prog/test/e2e/early_lib.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $^

$(E2E_WL_EARLY): $(O)/obj/prog/test/e2e/wl_early.o $(E2E_LIBEARLY)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $< -L$(O)/test/e2e -learly '-Wl,-rpath,$$ORIGIN' -Wl,--enable-new-dtags

$(O)/obj/prog/%.o: %.cc
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O2 -g -Wall -Wextra -Werror -MMD -MP -c $< -o $@

$(E2E_WL_CXX): $(O)/obj/prog/test/e2e/wl_cxx.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -o $@ $^

TEST_PROGS += $(E2E_WL_HARD) $(E2E_LIBHARD) $(E2E_LIBORDER) $(E2E_LIBUNDER) $(E2E_LIBEARLY) $(E2E_WL_EARLY) $(E2E_WL_CXX)

# What real programs do to their process (t_hostprogs.sh): descriptors
# closed under the shim, raw clones, odd malloc calls (wl_host.c).
E2E_WL_HOST := $(O)/test/e2e/wl_host
$(E2E_WL_HOST): $(O)/obj/prog/test/e2e/wl_host.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -o $@ $^ -lpthread

TEST_PROGS += $(E2E_WL_HOST)
