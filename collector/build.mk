# collector/: shimmerd, the daemon that stores events in SQLite.
COLLECTOR_SRCS := $(wildcard collector/*.c)
COLLECTOR_OBJS := $(COLLECTOR_SRCS:%.c=$(O)/obj/%.o) $(SCHEMA_OBJS) \
	$(O)/obj/common/conf.o

# libsystemd for socket activation and sd_notify (shimmerd.service).  A
# machine without its headers gets a daemon without them, said once; CI
# has them, and `shimmerd --version` says which was built.
SYSTEMD_LIBS := $(shell pkg-config --libs libsystemd 2>/dev/null)
ifneq ($(SYSTEMD_LIBS),)
$(O)/obj/collector/shimmerd.o $(O)/obj/collector/options.o: override CPPFLAGS += -DHAVE_LIBSYSTEMD \
	$(shell pkg-config --cflags libsystemd)
else
$(info shimmerd: libsystemd not found (install libsystemd-dev): built without socket activation and sd_notify)
endif

# libiberty for its bounded (callback) demangler of kernel names;
# libbpf (static) for the eBPF source, libdw for its stacks' CFI.
$(SHIMMERD): $(COLLECTOR_OBJS)
	$(BPF_SAY)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -liberty $(BPF_LDLIBS) $(SYSTEMD_LIBS) -ldw -lelf -lpthread -lm

# Unit tests: each links only the modules it exercises.
COLLECTOR_STORE_OBJS := $(O)/obj/collector/store.o $(O)/obj/collector/stacktree.o $(O)/obj/collector/log.o \
	$(SCHEMA_OBJS)
$(eval $(call unit_test,clock,$(O)/obj/collector/clock.o))
$(eval $(call unit_test,ptrmap,$(O)/obj/collector/ptrmap.o))
$(eval $(call unit_test,store,$(COLLECTOR_STORE_OBJS)))
# The unit test rule links fixed libraries: libiberty goes in by path.
LIBIBERTY := $(shell $(CC) -print-file-name=libiberty.a)
COLLECTOR_CLIENT_OBJS := $(patsubst %,$(O)/obj/collector/%.o,client ctl job ring record ingest \
	heapagg blockmap demangle clock ptrmap cputime)
$(eval $(call unit_test,client,$(COLLECTOR_CLIENT_OBJS) $(COLLECTOR_STORE_OBJS) \
	$(LIBIBERTY)))
$(eval $(call unit_test,demangle,$(O)/obj/collector/demangle.o $(LIBIBERTY)))
$(eval $(call unit_test,collector_ring,$(patsubst %,$(O)/obj/collector/%.o,ring record)))
$(eval $(call unit_test,heapagg,$(patsubst %,$(O)/obj/collector/%.o,heapagg blockmap ptrmap \
	ingest clock) $(COLLECTOR_STORE_OBJS)))
$(eval $(call unit_test,blockmap,$(O)/obj/collector/blockmap.o $(O)/obj/collector/ptrmap.o))
$(eval $(call unit_test,job,$(O)/obj/collector/job.o $(COLLECTOR_STORE_OBJS)))
$(eval $(call unit_test,conf,$(O)/obj/common/conf.o))
$(eval $(call unit_test,cputime,$(O)/obj/collector/cputime.o $(COLLECTOR_STORE_OBJS)))

# The eBPF source's helpers: they read this very process from outside.
# (The rule links fixed libraries: libelf and libdw go in by path.)
LIBELF_SO := $(shell $(CC) -print-file-name=libelf.so)
LIBDW_SO := $(shell $(CC) -print-file-name=libdw.so)
$(eval $(call unit_test,procmaps,$(O)/obj/collector/procmaps.o $(LIBELF_SO)))
$(eval $(call unit_test,caller,$(O)/obj/collector/caller.o $(O)/obj/collector/procmaps.o \
	$(LIBDW_SO) $(LIBELF_SO)))
