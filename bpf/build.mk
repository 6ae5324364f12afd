# bpf/: the BPF programs of shimmer attach and SHIMMER_OFFCPU=1, built as
# libbpf-tools builds its tools: clang -target bpf against a vmlinux.h that
# bpftool generates from the running kernel's BTF, then a bpftool skeleton
# that shimmerd includes (CO-RE: the object adapts to the kernel it loads
# on).  shimmerd links libbpf statically, so it runs where libbpf is not
# installed.
#
# Without libbpf's headers and static library, or without clang, bpftool
# or the kernel's BTF (unless $(O)/bpf already holds a skeleton built
# elsewhere, carried with the build), shimmerd is built without BPF
# support: the link says so in one line, and shimmer attach explains.

BPF_CLANG ?= clang
BPFTOOL ?= $(firstword $(shell command -v bpftool 2>/dev/null) $(wildcard /usr/sbin/bpftool /sbin/bpftool))
BPF_STRIP ?= $(shell command -v llvm-strip 2>/dev/null)
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
BPF_OUT := $(O)/bpf
BPF_SKEL := $(BPF_OUT)/probes.skel.h

have_cmd = $(shell command -v $(1) >/dev/null 2>&1 && echo y)
BPF_HAVE_LIBBPF := $(shell printf 'int main(void){return 0;}\n' | \
	$(CC) $(CPPFLAGS) $(LDFLAGS) -include bpf/libbpf.h -x c - -o /dev/null \
	-l:libbpf.a -lelf -lz >/dev/null 2>&1 && echo y)
# What building the programs takes; without it, a skeleton carried in
# $(BPF_OUT) from a build elsewhere is used as it is.
BPF_TOOLS_MISSING := $(strip \
	$(if $(call have_cmd,$(BPF_CLANG)),,clang) \
	$(if $(BPFTOOL),,bpftool) \
	$(if $(wildcard $(VMLINUX_BTF)),,the kernel's BTF ($(VMLINUX_BTF))))
BPF_CARRIED := $(if $(BPF_TOOLS_MISSING),$(wildcard $(BPF_SKEL)))

BPF_MISSING := $(strip \
	$(if $(BPF_HAVE_LIBBPF),,libbpf headers or libbpf.a (libbpf-dev, libelf-dev, zlib1g-dev)) \
	$(if $(BPF_CARRIED),,$(BPF_TOOLS_MISSING)))

ifeq ($(BPF_MISSING),)
BPF_CPPFLAGS := -DSHIMMER_BPF -I$(BPF_OUT) -Ibpf
BPF_LDLIBS := -l:libbpf.a -lelf -lz
BPF_SAY :=
else
BPF_CPPFLAGS := '-DSHIMMER_NO_BPF_REASON="missing at build time: $(BPF_MISSING)"'
BPF_LDLIBS :=
BPF_SAY = @printf '  %-7s %s\n' BPF 'skipped (missing: $(BPF_MISSING)): shimmer attach and SHIMMER_OFFCPU=1 are unavailable';
endif

ifeq ($(BPF_MISSING)$(BPF_CARRIED),)
$(BPF_OUT)/vmlinux.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@

$(BPF_OUT)/probes.bpf.o: bpf/probes.bpf.c bpf/probes.h bpf/sampling.h $(BPF_OUT)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(BPF_CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_x86 \
		-I$(BPF_OUT) -Ibpf $(CPPFLAGS) -c $< -o $@
	$(Q)$(if $(BPF_STRIP),$(BPF_STRIP) -g $@)

$(BPF_SKEL): $(BPF_OUT)/probes.bpf.o
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name probes_bpf > $@
endif

# The eBPF source is the one module that includes the skeleton.
# (override: a CPPFLAGS given on the command line, as test/gpu/run-gpu-tests
# gives one, would otherwise drop this one)
$(O)/obj/collector/bpfsrc.o: override CPPFLAGS += $(BPF_CPPFLAGS)
ifeq ($(BPF_MISSING),)
$(O)/obj/collector/bpfsrc.o: $(BPF_SKEL)
endif

# The BPF programs' sampler against the shim's (header only).
$(eval $(call unit_test,bpf_sampling,))
