/*
 * lost.h - ending the processes a dead collector left live, one statement
 * for the collector that opens the store next (store_recover()) and for
 * `shimmer run`, whose private collector no other will follow
 * (tools/run.c): each such row ends as 'collector_lost' at the store's
 * last commit (meta.last_commit_ns; what came after it was never stored),
 * never before it started.  The caller makes sure no live collector shares
 * the store (flock()).  Header only.
 */
#ifndef SHIMMER_LOST_H
#define SHIMMER_LOST_H

#define LOST_END_SQL                                                                \
	"UPDATE processes SET end_reason = 'collector_lost', end_ns = max(start_ns, " \
	"coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = "            \
	"'last_commit_ns'), start_ns)) WHERE end_reason IS NULL"

#endif
