# collector/: shimmerd, the daemon that stores events in SQLite.
COLLECTOR_SRCS := $(wildcard collector/*.c)
COLLECTOR_OBJS := $(COLLECTOR_SRCS:%.c=$(O)/obj/%.o) $(O)/gen/schema_sql.o

# libstdc++ for __cxa_demangle only (kernel names); the daemon stays C.
$(SHIMMERD): $(COLLECTOR_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -lstdc++ -lm

# Unit tests: each links only the modules it exercises.
COLLECTOR_STORE_OBJS := $(O)/obj/collector/store.o $(O)/obj/collector/log.o \
	$(O)/gen/schema_sql.o
$(eval $(call unit_test,clock,$(O)/obj/collector/clock.o))
$(eval $(call unit_test,ptrmap,$(O)/obj/collector/ptrmap.o))
$(eval $(call unit_test,store,$(COLLECTOR_STORE_OBJS)))
# The unit test rule links fixed libraries: libstdc++ goes in by path.
LIBSTDCXX := $(shell $(CC) -print-file-name=libstdc++.so)
COLLECTOR_CLIENT_OBJS := $(patsubst %,$(O)/obj/collector/%.o,client ring record ingest heapagg \
	clock ptrmap)
$(eval $(call unit_test,client,$(COLLECTOR_CLIENT_OBJS) $(COLLECTOR_STORE_OBJS) \
	$(LIBSTDCXX)))
$(eval $(call unit_test,heapagg,$(O)/obj/collector/heapagg.o $(O)/obj/collector/ptrmap.o \
	$(COLLECTOR_STORE_OBJS)))
