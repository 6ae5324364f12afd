/*
 * Finding and binding libcupti; see cupti_lib.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cupti_lib.h"
#include "modules.h"
#include "real.h"
#include "log.h"
#include "shim.h"

struct cupti_fns cupti_fn;
char cupti_lib_path[PATH_MAX];
static char cand[PATH_MAX];

const char *cupti_result_str(CUptiResult r)
{
	const char *s = 0;

	if (!cupti_fn.cuptiGetResultString || cupti_fn.cuptiGetResultString(r, &s) != CUPTI_SUCCESS ||
	    !s)
		return "unknown CUPTI error";
	return s;
}

/* dlopens cand if it exists; on success its path becomes cupti_lib_path. */
static void *try_open(void)
{
	void *h;

	if (access(cand, R_OK) < 0)
		return 0;
	h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		memcpy(cupti_lib_path, cand, sizeof(cupti_lib_path));
		/* its frames are in launch stacks: named like any other object's */
		modules_mark_stale();
		log_debug("CUPTI: %s", cupti_lib_path);
	} else {
		log_debug("CUPTI: %s: %s", cand, dlerror());
	}
	return h;
}

/* Tries dir/sub/libcupti.so.<major>, then dir/sub/libcupti.so. */
static void *try_dir(const char *dir, int dlen, const char *sub_dir, const char *major)
{
	void *h;

	if (major[0]) {
		if (snprintf(cand, sizeof(cand), "%.*s%s/libcupti.so.%s", dlen, dir, sub_dir, major) <
			    (int)sizeof(cand) &&
		    (h = try_open()))
			return h;
	}
	if (snprintf(cand, sizeof(cand), "%.*s%s/libcupti.so", dlen, dir, sub_dir) < (int)sizeof(cand))
		return try_open();
	return 0;
}

void *cupti_lib_load(char *why, size_t len)
{
	static char cudart[PATH_MAX];
	static const char *const subs[] = { "/extras/CUPTI/lib64", "/lib64",
					    "/targets/x86_64-linux/lib" };
	char major[16] = { 0 };
	const char *homes[2] = { getenv("CUDA_HOME"), "/usr/local/cuda" }, *slash, *v;
	void *h;
	unsigned int i, j;
	int dlen;

	if (real_loaded("libcupti.so", cand) == 0 && (h = try_open()))
		return h;
	if (real_loaded("libcudart.so", cudart) < 0)
		cudart[0] = '\0';
	/* libcudart.so.13 -> libcupti.so.13: the runtime's own major. */
	snprintf(major, sizeof(major), "%d", CUDART_VERSION / 1000);
	if (cudart[0]) {
		slash = strrchr(cudart, '/');
		v = strstr(slash ? slash : cudart, ".so.");
		if (v) {
			for (i = 0; i + 1 < sizeof(major) && v[4 + i] >= '0' && v[4 + i] <= '9'; i++)
				major[i] = v[4 + i];
			major[i] = '\0';
		}
		dlen = slash ? (int)(slash - cudart) : 1;
		if ((h = try_dir(slash ? cudart : ".", dlen, "", major)) ||
		    (h = try_dir(slash ? cudart : ".", dlen, "/../../cuda_cupti/lib", major)))
			return h;
	}
	for (i = 0; i < 2; i++) {
		if (!homes[i] || !homes[i][0] || (i == 1 && homes[0] && !strcmp(homes[0], homes[1])))
			continue;
		for (j = 0; j < sizeof(subs) / sizeof(subs[0]); j++)
			if ((h = try_dir(homes[i], (int)strlen(homes[i]), subs[j], major)))
				return h;
	}
	snprintf(why, len, "no libcupti found (looked beside %.300s and under %.300s%s/usr/local/cuda)",
		 cudart[0] ? cudart : "libcudart", homes[0] ? homes[0] : "",
		 homes[0] ? " and " : "");
	return 0;
}

int cupti_lib_bind(void *h, char *why, size_t len)
{
#define FN_SYM(name, req)                                                    \
	cupti_fn.name = (__typeof__(cupti_fn.name))dlsym(h, #name);          \
	if ((req) && !cupti_fn.name) {                                       \
		snprintf(why, len, "%.400s lacks %s", cupti_lib_path, #name); \
		return -ENOENT;                                              \
	}
	CUPTI_FNS(FN_SYM)
#undef FN_SYM
	return 0;
}
