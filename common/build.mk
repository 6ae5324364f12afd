# common/: headers shared by the programs (wire format, UTF-8 check, clock),
# and the schema, embedded into the collector as C strings so the daemon
# needs no data files at run time: each file alone (shimmer_schema_steps),
# run in order for a new database and from its version on for an older store.

SCHEMA_SQL := $(sort $(wildcard schema/*.sql))
SCHEMA_GEN := $(O)/gen/schema_sql.c
# The schema version, counted from the same files: the collector writes it
# and every reader refuses a newer store with it (shimmer_schema_version,
# declared in common/version.h).
SCHEMA_VERSION_GEN := $(O)/gen/schema_version.c
SCHEMA_OBJS := $(O)/gen/schema_sql.o $(O)/gen/schema_version.o

$(SCHEMA_GEN): $(SCHEMA_SQL) common/embed-sql
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)common/embed-sql shimmer_schema_steps $(SCHEMA_SQL) > $@

$(SCHEMA_VERSION_GEN): $(SCHEMA_SQL) common/embed-sql
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)common/embed-sql --version shimmer_schema_version $(SCHEMA_SQL) > $@

# Objects for unit tests and other non-shim programs that take a shim module:
# sanitized like the rest of the test binary, position-independent.
$(O)/obj/t/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@

# Programs that run under the shim (test workloads, the fake CUDA runtime,
# benchmarks) are never sanitized: see SHIM_CFLAGS.
$(O)/obj/prog/%.o: %.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_BASE) -I$(CUDA_HOME)/include $(CPPFLAGS) $(CFLAGS_BASE) -fPIC $(EXTRA_CFLAGS) -MMD -MP -c $< -o $@

# $(call unit_test,NAME,OBJECTS): build/test/test_NAME from test/unit/test_NAME.c
define unit_test
UNIT_TESTS += $(O)/test/test_$(1)
$(O)/test/test_$(1): $(O)/obj/test/unit/test_$(1).o $(2)
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ -lcmocka -lsqlite3 -lpthread -lm
endef
