/*
 * Finding the real functions behind our interposed ones.  Neither function
 * caches (callers keep the pointer they get) and both may allocate, so call
 * them with the re-entry guard set.  Thread-safe.
 */
#ifndef SHIMMER_REAL_H
#define SHIMMER_REAL_H

/* The next definition of name after the shim in the global scope, or NULL. */
void *real_next(const char *name);

/*
 * A CUDA runtime function: dlsym(RTLD_NEXT), else from a libcudart.so*
 * already loaded outside the global scope (dlopen'd RTLD_LOCAL by a plugin),
 * found with dl_iterate_phdr.  NULL when no runtime is loaded.
 */
void *real_cuda(const char *name);

/* Copies into path (PATH_MAX bytes) the name of the first loaded object
 * whose file name starts with prefix ("libcudart.so").  0 or -ENOENT.
 * Takes the loader's lock; does not allocate. */
int real_loaded(const char *prefix, char *path);

/* The shim's own absolute path, for the injection variables; NULL if
 * unknown.  Computed on the first call (the constructor's). */
const char *real_self_path(void);

#endif /* SHIMMER_REAL_H */
