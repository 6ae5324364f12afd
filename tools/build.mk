# tools/: the shimmer command.
TOOLS_SRCS := $(wildcard tools/*.c)
TOOLS_OBJS := $(TOOLS_SRCS:%.c=$(O)/obj/%.o)

$(SHIMMER): $(TOOLS_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -lm

# Unit tests of the tools' modules.
TOOLS_SUMMARY_OBJS := $(patsubst %,$(O)/obj/tools/%.o,summary gpu map stats fmt cli store)
$(eval $(call unit_test,stats,$(O)/obj/tools/stats.o))
$(eval $(call unit_test,fmt,$(O)/obj/tools/fmt.o))
$(eval $(call unit_test,summary,$(TOOLS_SUMMARY_OBJS) $(O)/gen/schema_sql.o))
