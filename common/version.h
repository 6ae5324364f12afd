/*
 * The release, printed by `shimmer --version` and `shimmerd --version`
 * with the versions that decide compatibility: the wire format (a shim and
 * a collector must agree on it) and the store's schema.
 */
#ifndef SHIMMER_VERSION_H
#define SHIMMER_VERSION_H

#define SHIMMER_VERSION "0.1.0"

/* The store schema version this build writes (shimmerd) and reads up to
 * (shimmer): the number of schema/NNN_*.sql files, counted at build time
 * by common/embed-sql into gen/schema_version.c. */
extern const int shimmer_schema_version;

#endif
