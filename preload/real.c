/*
 * Symbol resolution.  Frameworks often dlopen their CUDA plugin RTLD_LOCAL;
 * the plugin's libcudart then sits outside the global scope, RTLD_NEXT
 * cannot see it, yet its references to cudaMalloc still bind to our
 * (global, preloaded) definitions.  We then look for a loaded libcudart by
 * name and dlopen it RTLD_NOLOAD, which only takes a reference.  The
 * dlopen happens after dl_iterate_phdr returns: the callback runs under the
 * loader's lock.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <link.h>
#include <string.h>

#include "real.h"

static void *cudart;

void *real_next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

struct loaded_q {
	const char *prefix;
	size_t len;
	char *path;
};

static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
	struct loaded_q *q = data;
	const char *base;
	size_t n;

	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	n = strlen(info->dlpi_name);
	if (strncmp(base, q->prefix, q->len) || n >= PATH_MAX)
		return 0;
	memcpy(q->path, info->dlpi_name, n + 1);
	return 1;
}

int real_loaded(const char *prefix, char *path)
{
	struct loaded_q q = { .prefix = prefix, .len = strlen(prefix), .path = path };

	return dl_iterate_phdr(find_loaded, &q) ? 0 : -ENOENT;
}

void *real_cuda(const char *name)
{
	char path[PATH_MAX];
	void *fn = dlsym(RTLD_NEXT, name);
	void *h, *prev = 0;

	if (fn)
		return fn;
	h = __atomic_load_n(&cudart, __ATOMIC_ACQUIRE);
	if (!h) {
		if (real_loaded("libcudart.so", path) < 0)
			return 0;
		h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
		if (!h)
			return 0;
		/* Two racing threads each took a reference: keep one. */
		if (!__atomic_compare_exchange_n(&cudart, &prev, h, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			dlclose(h);
			h = prev;
		}
	}
	return dlsym(h, name);
}

const char *real_self_path(void)
{
	static char self[PATH_MAX];
	Dl_info info;

	if (self[0])
		return self;
	if (!dladdr((void *)real_self_path, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self)) {
		self[0] = '\0';
		return 0;
	}
	return self;
}
