/* export-traced.h: a traced profile's function table split by task, the part of the
 * exports (pprof, collapsed --from-edges) that label or frame traced times by task
 * (export-traced.c). */
#ifndef VW_EXPORT_TRACED_H
#define VW_EXPORT_TRACED_H

#include <stdint.h>

#include "model.h"

/* One piece of a traced table: `callee`'s own time and calls in the calls `caller`
 * made, in one task, or in the threads' own stacks of one file. */
struct vw_part {
	const struct cp_extras *ex; /* the file's; ex->present 0: no tasks known */
	const struct cp_task *task; /* NULL: the threads' own stacks (and finished tasks
				     * the engine folded into them, which a note says) */
	int64_t thread;		    /* tid; -1 when the piece spans threads or none is known */
	uint32_t callee;	    /* index into the model's merged table */
	int64_t caller;		    /* index, or -1: own time in calls no edge accounts for */
	uint64_t nc;
	uint64_t ns; /* own time */
};

/* Called once per non-empty piece; a non-zero return stops the walk and is returned. */
typedef int (*vw_part_fn)(void *arg, const struct vw_part *part);

/* Walks every file of `m`: each task's edges and own times, then the rest of the file's
 * table (its top-level numbers less its tasks'), which is the threads' own stacks.
 * Per function, the pieces add up to what `report` shows as tsub, in ns, wherever the
 * file's tasks add up to no more than its top level (always, for a coprof file), so
 * an export's totals are the table's. 0, -ENOMEM or the callback's return. */
int vw_traced_parts(const struct vw_model *m, vw_part_fn fn, void *arg);

/* The ns in `s` seconds, rounded; 0 for a negative or non-finite value. */
uint64_t vw_ns(double s);

#endif
