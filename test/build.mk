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
		-Wl,--version-script=test/fake_cudart/libcudart.map -lpthread
	$(Q)ln -sf libcudart.so.13 $(FAKE_CUDART_DIR)/libcudart.so

# $(call cuda_prog,OUTPUT,OBJECTS,RPATH): a program linked against the fake
# runtime, found at run time through RPATH (relative to $ORIGIN).
define cuda_prog
$(1): $(2) $(FAKE_CUDART)
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) -o $$@ $(2) -L$(FAKE_CUDART_DIR) -lcudart '-Wl,-rpath,$$$$ORIGIN/$(3)' \
		-Wl,--enable-new-dtags -lpthread
endef

E2E_WL := $(O)/test/e2e/wl
E2E_WL_OBJS := $(patsubst %,$(O)/obj/prog/test/e2e/%.o,wl wlog wl_cuda_plain wl_cuda_ptsz)
$(eval $(call cuda_prog,$(E2E_WL),$(E2E_WL_OBJS),../fake_cudart))

HEAPDEMO := $(O)/examples/heapdemo
$(eval $(call cuda_prog,$(HEAPDEMO),$(O)/obj/prog/examples/heapdemo.o,../test/fake_cudart))

E2E_BADCLIENT := $(O)/test/e2e/badclient
$(E2E_BADCLIENT): $(O)/obj/test/e2e/badclient.o
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^

TEST_PROGS += $(FAKE_CUDART) $(E2E_WL) $(E2E_BADCLIENT) $(HEAPDEMO)
