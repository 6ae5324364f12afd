# tools/: the shimmer command.
TOOLS_SRCS := $(wildcard tools/*.c)
TOOLS_OBJS := $(TOOLS_SRCS:%.c=$(O)/obj/%.o)

$(SHIMMER): $(TOOLS_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -lm
