# tools/: the shimmer command.
TOOLS_SRCS := $(wildcard tools/*.c)
TOOLS_OBJS := $(TOOLS_SRCS:%.c=$(O)/obj/%.o) $(O)/obj/common/conf.o $(O)/gen/report_assets.o \
	$(O)/gen/schema_version.o
# Everything but the dispatcher: what the unit tests link.
TOOLS_LIB_OBJS := $(filter-out $(O)/obj/tools/main.o,$(TOOLS_OBJS))
TOOLS_LIBS := -lsqlite3 -ldw -lelf -lstdc++ -lpthread -lm

$(SHIMMER): $(TOOLS_OBJS)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(TOOLS_LIBS)

# Unit tests of the tools' modules.  Those of the model and the commands
# link the whole of tools/ (less main.o), the embedded schema to make
# stores with, libdw (symbolization) and the C++ runtime (demangling).
$(eval $(call unit_test,stats,$(O)/obj/tools/stats.o))
$(eval $(call unit_test,fmt,$(O)/obj/tools/fmt.o))
# the command line's rules for numbers (cli.c), with the readers it shares (conf.c)
$(eval $(call unit_test,cli,$(O)/obj/tools/cli.o $(O)/obj/tools/fmt.o $(O)/obj/common/conf.o))
# symtab against libdwfl's own search, on this program and the libraries it loads
$(eval $(call unit_test,symtab,$(O)/obj/tools/symtab.o $(O)/obj/tools/map.o -ldw -lelf))

define tools_test
UNIT_TESTS += $(O)/test/test_$(1)
$(O)/test/test_$(1): $(O)/obj/test/unit/test_$(1).o $(TOOLS_LIB_OBJS) $(O)/gen/schema_sql.o
	$$(call msg,LD,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ -lcmocka $(TOOLS_LIBS)
endef
$(foreach t,summary leaks symbolize peak temporary emit model,$(eval $(call tools_test,$(t))))

# shimmer report: its page script and style, embedded in the binary; the
# charting library (npm, pinned) and its licences under $(O)/share/shimmer,
# where the shimmer of the build tree looks (PREFIX/share/shimmer once
# installed).
REPORT_PAGE := tools/report/report.js tools/report/report.css
$(O)/gen/report_assets.c: $(REPORT_PAGE) tools/report/embed
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)tools/report/embed report_js=tools/report/report.js report_css=tools/report/report.css > $@

REPORT_SHARE := $(O)/share/shimmer
report-assets:
	$(Q)tools/report/install-assets $(REPORT_SHARE)

all: report-assets
.PHONY: report-assets
