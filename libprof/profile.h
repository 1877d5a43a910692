/* profile.h: a profile in memory, as one .pstat file holds it (DESIGN "The file").
 *
 * The engine builds one at dump time and hands it to the writer (pstat-write.c); the
 * reader (pstat-read.c) builds one from a file written by coprof, cProfile or yappi,
 * and the viewer only ever sees this. Times are seconds, as pstats stores them.
 * Plain data, no hidden state: every pointer is owned by the profile's arena. */
#ifndef CP_PROFILE_H
#define CP_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/* The pstats key of a function. */
struct cp_key {
	const char *file; /* UTF-8; "~" for builtins */
	uint64_t line;
	const char *name; /* UTF-8 */
};

/* pstats' four numbers. For a function: cc primitive calls, nc all calls, tt own time,
 * ct cumulative time. For an edge the same four, though the file stores the edge
 * tuple as (nc, cc, tt, ct), as cProfile does. */
struct cp_stat {
	uint64_t cc;
	uint64_t nc;
	double tt; /* s */
	double ct; /* s */
};

struct cp_edge {
	uint32_t caller; /* index into the owning cp_stats' funcs */
	struct cp_stat s;
};

struct cp_func {
	struct cp_key key;
	struct cp_stat s;
	struct cp_edge *callers;
	uint32_t ncallers;
};

/* One pstats dict: every caller is also one of funcs (the writer and the reader both
 * keep that true). */
struct cp_stats {
	struct cp_func *funcs;
	uint32_t nfuncs;
};

struct cp_task {
	uint64_t id;
	const char *name;
	const char *runtime; /* "ucontext", "asyncio", ... */
	uint64_t thread;     /* tid of the thread that ran it */
	double ttot;         /* s, on its virtual clock */
	uint64_t resumes;
	const char *state; /* "running", "suspended", "finished" */
	struct cp_stats stats; /* this task's own functions */
	/* Rule 12, s, when `timed` (trace mode; not in older files): its steps on the CPU
	 * and the wall clock, the wall time it sat ready (in all, and the longest once)
	 * and waited otherwise. */
	int timed;
	double run_cpu, run_wall, ready, ready_max, waiting;
};

/* Calls of a function that no caller in their context made: a context's roots. cc is
 * nc (a root call is never recursive). */
struct cp_root {
	struct cp_key key;
	struct cp_stat s;
};

struct cp_thread {
	uint64_t tid;
	const char *name;
	double ttot; /* s, profiled time on this thread's clock */
	uint64_t switches; /* context switches made on this thread */
	/* The roots of the thread's own stack (finished tasks folded into it included);
	 * none when unknown (sample mode, older files). */
	struct cp_root *roots;
	uint32_t nroots;
};

/* A sampled stack (sample mode): frames index the top-level stats' funcs,
 * innermost first. `task` is -1 for a thread's own context. */
struct cp_stack {
	int64_t task; /* index into tasks, or -1 */
	uint64_t thread; /* tid */
	uint32_t *frames;
	uint32_t depth;
	uint64_t count; /* samples */
	uint64_t weight; /* ns, the samples' summed periods; 0 if the file had none */
	uint8_t waiting; /* 1: charged while the context was suspended (wall) */
};

/* A stall (doc/design.md rule 11): one step of a task that held its thread at least
 * the threshold long, with the stack of its longest point. */
struct cp_stall {
	uint64_t thread;  /* tid */
	uint64_t task_id; /* the task's id, as the task table gives it */
	const char *task; /* its name */
	double seconds;	  /* the step's length on the profile's clock */
	struct cp_key *frames; /* innermost first */
	uint32_t depth;
	int64_t behind; /* tasks that were ready and waited behind it; -1: not known */
};

/* An await edge (doc/python.md, "Who awaits whom"): task `waiter` waited on task
 * `awaited` `count` times, `seconds` of wall time in all, under either clock. */
struct cp_await {
	uint64_t thread; /* tid of the thread that saw it */
	uint64_t waiter_id, awaited_id;
	const char *waiter, *awaited; /* names; NULL: unknown */
	const char *kind; /* "task", "gather", "taskgroup", "shield", "wait" */
	uint64_t count;
	double seconds; /* wall */
};

struct cp_counter {
	const char *name;
	uint64_t n;
};

/* The coprof extras: the second marshal object of a coprof file. */
struct cp_extras {
	int present; /* 0 for cProfile's and yappi's files */
	int64_t version;
	const char *clock; /* "cpu" or "wall" */
	const char *mode;  /* "trace" or "sample" */
	int64_t pid;
	const char **argv;
	uint32_t argc;
	double start, stop; /* s since the epoch */
	double hz;          /* sample mode; 0 otherwise */
	int overflow;       /* a limit was hit and recording stopped */
	struct cp_counter *dropped;
	uint32_t ndropped;
	const char **notes;
	uint32_t nnotes;
	struct cp_task *tasks;
	uint32_t ntasks;
	struct cp_thread *threads;
	uint32_t nthreads;
	struct cp_stack *stacks;
	uint32_t nstacks;
	/* Stalls, longest first, and the threshold they passed (s; 0: the file has none). */
	struct cp_stall *stalls;
	uint32_t nstalls;
	double stall_threshold;
	/* Await edges, longest first (none in older files and sample mode). */
	struct cp_await *awaits;
	uint32_t nawaits;
	/* Read from a file: how many synthetic functions (whole.h) the reader took out
	 * of its pstats dict. */
	uint32_t nsynthetic;
};

struct cp_arena;

struct cp_profile {
	struct cp_stats stats;
	struct cp_extras ex;
	struct cp_arena *arena; /* owns everything above */
};

/* Format version written into the extras. */
#define CP_FORMAT_VERSION 1

/* A bump allocator the profile's data lives in; freed whole. */
struct cp_arena *cp_arena_new(void);
void *cp_arena_alloc(struct cp_arena *a, size_t size);       /* zeroed; NULL: ENOMEM */
const char *cp_arena_strdup(struct cp_arena *a, const char *s, size_t len);
void cp_arena_free(struct cp_arena *a);
/* Forgets every allocation, keeping one chunk for reuse. */
void cp_arena_reset(struct cp_arena *a);

/* An empty profile with its own arena. */
int cp_profile_new(struct cp_profile **out);
void cp_profile_free(struct cp_profile *p);

/* Writes `p` to `path` via a temporary name in the same directory and rename(2), so
 * a crash never leaves half a file. 0, -errno, or a COPROF_E* code when what stands at
 * `path` is not a regular file (coprof_dump in coprof.h says which are replaced). */
int cp_profile_write(const struct cp_profile *p, const char *path);

/* The bytes cp_profile_write would write, written to `fd` from its current offset (no
 * temporary, no rename, no fsync: the caller publishes). 0, -EINVAL or -errno. */
int cp_profile_write_fd(const struct cp_profile *p, int fd);

/* The bytes cp_profile_write would write, in a malloc'ed buffer the caller frees (for
 * tests, fuzzing and pipes). 0, -EINVAL (a caller, frame or task index out of range)
 * or -ENOMEM. */
int cp_profile_encode(const struct cp_profile *p, unsigned char **buf, size_t *len);

/* Reads a file written by coprof, cProfile (pstats.dump_stats) or yappi (pstat type).
 * On error returns -EINVAL (malformed), -ENODATA (empty) or another -errno, and puts
 * one human-readable line in err. Never crashes on any input. */
int cp_profile_read(const char *path, struct cp_profile **out, char *err, size_t errlen);
int cp_profile_read_mem(const void *buf, size_t len, struct cp_profile **out, char *err,
			size_t errlen);

#endif
