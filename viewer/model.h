/* model.h: what the viewer, report, export and diff show, with no curses in it.
 * A function table merges one or more pstats dicts by key (as pstats.add does) and
 * links each function to its callers and callees; queries sort and filter it.
 * Built from profiles the file layer read (profile.h); single-threaded. */
#ifndef VW_MODEL_H
#define VW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* One end of a caller->callee edge. `func` is the other end (the caller in a callers
 * list, the callee in a callees list); `s` is the edge's four numbers, the same in
 * both lists. */
struct vw_edge {
	uint32_t func;
	struct cp_stat s;
};

struct vw_func {
	struct cp_key key; /* strings borrowed from the source profiles */
	struct cp_stat s;
	struct vw_edge *callers;
	uint32_t ncallers;
	struct vw_edge *callees;
	uint32_t ncallees;
};

struct vw_table {
	struct vw_func *funcs;
	uint32_t nfuncs;
	struct vw_edge *edges; /* storage behind every callers and callees list */
	uint32_t *slots;       /* open-addressing hash of keys -> index + 1 */
	uint32_t nslots;       /* a power of two */
	double total_tt;       /* s, sum of every tt: pstats' "in X seconds" */
	uint64_t total_nc, total_cc;
};

enum vw_sort {
	VW_SORT_NAME,
	VW_SORT_FILE,
	VW_SORT_NCALL,
	VW_SORT_TSUB,
	VW_SORT_TTOT,
	VW_SORT_TAVG,
	VW_SORT_COUNT
};

/* Which rows of a table, in what order. Numbers sort largest first and names A to Z;
 * `reverse` flips that. `filter` (NULL or "": everything) keeps the functions whose
 * name or file contains it. */
struct vw_query {
	enum vw_sort sort;
	int reverse;
	const char *filter;
};

/* Merges `n` pstats dicts into `t`: functions with the same (file, line, name) add
 * their four numbers, and so do edges with the same caller and callee, as pstats.add.
 * Edges naming a function outside their dict are dropped. 0 or -ENOMEM; on error `t`
 * is left empty. */
int vw_table_build(struct vw_table *t, const struct cp_stats *const *stats, size_t n);
void vw_table_free(struct vw_table *t);

/* The index of the function keyed `k`, or -1. */
int64_t vw_table_find(const struct vw_table *t, const struct cp_key *k);

/* Fills `out` (room for t->nfuncs) with the indexes of the rows `q` selects, in its
 * order, and returns how many. Ties break on name, file and line, so the order is
 * stable across runs. */
uint32_t vw_table_select(const struct vw_table *t, const struct vw_query *q, uint32_t *out);

/* Sorts edges the way `q` sorts functions (the edge's own numbers, the other end's
 * key); q->filter is ignored. */
void vw_edges_sort(const struct vw_table *t, struct vw_edge *e, uint32_t n,
		   const struct vw_query *q);

/* yappi's tavg: ttot per call (0 for a function never called). */
double vw_tavg(const struct cp_stat *s);

/* "name", "file", "ncall", "tsub", "ttot", "tavg". 0 or -EINVAL. */
int vw_sort_parse(const char *s, enum vw_sort *out);
const char *vw_sort_name(enum vw_sort s);

/* A task with its own function table, built on first use. */
struct vw_task {
	const struct cp_task *t;
	uint32_t file; /* index into the model's profiles */
	struct vw_table *table;
};

struct vw_thread {
	const struct cp_thread *t;
	uint32_t file;
};

struct vw_stall {
	const struct cp_stall *s;
	uint32_t file;
};

/* One or more files, merged. The header fields come from the files' extras. */
struct vw_model {
	struct cp_profile **profiles;
	const char **paths;
	uint32_t nprofiles;
	struct vw_table funcs; /* every file's top-level dict, merged */
	struct vw_task *tasks;
	uint32_t ntasks;
	struct vw_thread *threads;
	uint32_t nthreads;
	struct vw_stall *stalls; /* every file's, longest first */
	uint32_t nstalls;
	double stall_threshold; /* s: the largest of the files'; 0: none measured stalls */
	const char *clock;	    /* "cpu", "wall", "mixed" or "?" (no extras) */
	const char *mode;	    /* "trace", "sample", "mixed" or "?" */
	double duration;	    /* s, summed over the files with extras; 0 if none */
	int64_t pid;		    /* of the first file with extras; -1 if none */
	const struct cp_extras *ex; /* the first file with extras, or NULL */
	/* The whole-program table (tree.h), built on first use. */
	struct vw_table *whole;
	uint32_t whole_root;
	struct cp_arena *whole_arena; /* its synthetic functions */
};

/* Reads every path and merges them. On error, writes one line naming the file into
 * err and returns -errno; `m` is then empty. */
int vw_model_load(struct vw_model *m, char *const *paths, int n, char *err, size_t errlen);

/* Builds a model over profiles already in memory; the model takes them over. */
int vw_model_from(struct vw_model *m, struct cp_profile **profiles, const char **paths, uint32_t n);
void vw_model_free(struct vw_model *m);

/* The function table of task `i` (NULL: out of memory). */
const struct vw_table *vw_model_task_table(struct vw_model *m, uint32_t i);

/* The command line of the first file with extras, space-joined into buf. */
void vw_model_command(const struct vw_model *m, char *buf, size_t len);

#endif
