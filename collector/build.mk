# collector/: shimmerd, the daemon that stores events in SQLite.
COLLECTOR_SRCS := $(wildcard collector/*.c)
COLLECTOR_OBJS := $(COLLECTOR_SRCS:%.c=$(O)/obj/%.o) $(O)/gen/schema_sql.o

$(SHIMMERD): $(COLLECTOR_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ -lsqlite3 -lm
