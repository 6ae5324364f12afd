# preload/: libshimmer.so, the shim preloaded into traced processes.
SHIM_SRCS := $(wildcard preload/*.c)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(O)/obj/%.o)

$(LIB): $(SHIM_OBJS) preload/shimmer.map
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -shared -o $@ $(SHIM_OBJS) -Wl,--version-script=preload/shimmer.map -Wl,-z,now -ldl -lpthread
