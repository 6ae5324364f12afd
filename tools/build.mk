# tools/: the shimmer command.
TOOLS_SRCS := $(wildcard tools/*.c)
TOOLS_OBJS := $(TOOLS_SRCS:%.c=$(O)/obj/%.o) $(O)/obj/common/conf.o

$(SHIMMER): $(TOOLS_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -ldw -lelf -lstdc++ -lm

# Unit tests of the tools' modules.
TOOLS_SUMMARY_OBJS := $(patsubst %,$(O)/obj/tools/%.o,summary gpu map stats fmt cli store)
$(eval $(call unit_test,stats,$(O)/obj/tools/stats.o))
$(eval $(call unit_test,fmt,$(O)/obj/tools/fmt.o))
$(eval $(call unit_test,summary,$(TOOLS_SUMMARY_OBJS) $(O)/gen/schema_sql.o))

# The memory commands' tests link libdw (symbolization) and the C++
# runtime (demangling), which the shared unit_test rule does not.
TOOLS_MEM_OBJS := $(patsubst %,$(O)/obj/tools/%.o,sites symbolize map fmt cli store) \
	$(O)/gen/schema_sql.o
define tools_mem_test
UNIT_TESTS += $(O)/test/test_$(1)
$(O)/test/test_$(1): $(O)/obj/test/unit/test_$(1).o $(sort $(O)/obj/tools/$(1).o $(TOOLS_MEM_OBJS))
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ -lcmocka -lsqlite3 -ldw -lelf -lstdc++ -lm
endef
$(eval $(call tools_mem_test,leaks))
$(eval $(call tools_mem_test,symbolize))
$(eval $(call tools_mem_test,peak))
$(eval $(call tools_mem_test,temporary))
