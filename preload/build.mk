# preload/: libshimmer.so, the shim preloaded into traced processes.
SHIM_SRCS := $(wildcard preload/*.c)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(O)/obj/%.o) $(O)/obj/pic/common/conf.o

$(LIB): $(SHIM_OBJS) preload/shimmer.map
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $(SHIM_OBJS) -Wl,--version-script=preload/shimmer.map -Wl,-z,now -Wl,-z,defs -ldl -lpthread -lm

# Unit tests link the module under test, built sanitized ($(O)/obj/t/).
$(eval $(call unit_test,ring,$(O)/obj/t/preload/ring.o))
$(eval $(call unit_test,sampled,$(O)/obj/t/preload/sampled.o))
$(eval $(call unit_test,sampler,))
$(eval $(call unit_test,intern,$(O)/obj/t/preload/intern.o))
$(eval $(call unit_test,stacktab,$(O)/obj/t/preload/stacktab.o))
$(eval $(call unit_test,unwind,$(O)/obj/t/preload/unwind.o))
