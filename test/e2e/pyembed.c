/*
 * pyembed.c: a program that embeds Python the way plugins do, loading
 * the runtime with dlopen after it started (the shim's constructor long
 * done), by the name given: a bare soname (found on the loader's path) or
 * a path; RTLD_GLOBAL, or RTLD_LOCAL with a third argument "local".  It
 * runs CODE and returns 0, or 2 when the runtime cannot be loaded, 3 when
 * CODE raised (t_pyarena.sh).
 *
 *   pyembed LIBPYTHON CODE [local]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int flags = RTLD_NOW | (argc > 3 && strcmp(argv[3], "local") == 0 ? RTLD_LOCAL : RTLD_GLOBAL);
	void (*init)(void);
	int (*run)(const char *, void *);
	void *h;

	if (argc < 3) {
		fprintf(stderr, "usage: pyembed LIBPYTHON CODE [local]\n");
		return 2;
	}
	h = dlopen(argv[1], flags);
	if (!h) {
		fprintf(stderr, "pyembed: %s\n", dlerror());
		return 2;
	}
	*(void **)&init = dlsym(h, "Py_Initialize");
	*(void **)&run = dlsym(h, "PyRun_SimpleStringFlags");
	if (!init || !run) {
		fprintf(stderr, "pyembed: %s has no Py_Initialize\n", argv[1]);
		return 2;
	}
	init();
	return run(argv[2], NULL) ? 3 : 0;
}
