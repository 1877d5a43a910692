/* engine.h: the engine's internal data (profiler, threads, contexts, records) and the
 * functions its files share. Records are written only by the thread that owns them,
 * inside an "event section" (engine-event.c); the dumping thread reads them after
 * pausing every writer (engine.c: cp_pause). Nothing here is exported. */
#ifndef CP_ENGINE_H
#define CP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "coprof.h"
#include "pool.h"
#include "profile.h"

/* Finished contexts whose own function tables are kept for the task table; older ones
 * are folded into their thread's "(finished tasks)" aggregate. */
#define CP_KEEP_FINISHED 4096
/* Frames per context stack; calls deeper than this are counted, not recorded. */
#define CP_MAX_DEPTH (1u << 16)
#define CP_MAX_RESOLVERS 16
#define CP_DEFAULT_MEMORY_LIMIT ((size_t)256 << 20)
/* Stalls (rule 11): a task step at least this long, unless the options say otherwise;
 * each thread keeps its CP_STALLS_KEPT longest, with the innermost CP_STALL_FRAMES
 * frames of each, and counts the others. */
#define CP_DEFAULT_STALL_NS (20 * 1000000ull)
#define CP_STALLS_KEPT 64
#define CP_STALL_FRAMES 32
/* Sample mode: a step keeps at most this many of its ticks' stacks, evenly spread
 * (coprof_step_tick); a stall keeps them, and its stack is read off them when the
 * profile is written (snapshot.c). */
#define CP_STEP_TICKS 8
/* Await edges (coprof_await_add) each thread keeps at most; the table starts small
 * and doubles up to this. */
#define CP_AWAITS_KEPT 8192

/* The profiler state word: a generation (bumped by start and clear) above two bits. */
#define CP_RECORDING 1u
#define CP_PAUSED 2u
#define CP_GEN_STEP 4u

enum cp_ctx_state {
	CP_CTX_SUSPENDED = 0,
	CP_CTX_RUNNING = 1,
	CP_CTX_FINISHED = 2,
};

/* The pstats four of one function in one context, plus what accounting needs. 72
 * bytes (a pool class): a task holds one per function it ran. */
struct cp_rec {
	uintptr_t key;
	uint64_t nc, cc;
	uint64_t tt; /* ns, own time */
	uint64_t ct; /* ns, cumulative, outermost activations only */
	/* A call cache: the callee this function called last (last_rec->key is its key),
	 * with its edge, so a loop calling the same function hashes nothing. */
	struct cp_rec *last_rec;
	struct cp_erec *last_edge;
	/* Who called it: NULL before its first activation; a record of the same context
	 * when every activation so far was that function's call (the edge from it is
	 * then virtual: its numbers are this record's, and no edge record exists); else
	 * CP_VIA_MIXED, and its callers' edges are records. Most functions of a task have
	 * one caller, so most of a task's edges cost nothing. */
	struct cp_rec *via;
	uint32_t level;	   /* activations of this function open on the context's stack */
	uint32_t snap_idx; /* the dumper's scratch (snapshot.c) */
};

/* cp_rec.via of a function called from two places, or also with no caller. */
#define CP_VIA_MIXED ((struct cp_rec *)1)
/* A frame's (or a call cache's) edge when it is its callee's virtual one. */
#define CP_EDGE_VIRTUAL ((struct cp_erec *)1)

/* The caller whose edge to r is virtual, or NULL. */
static inline struct cp_rec *cp_via_caller(const struct cp_rec *r)
{
	return (uintptr_t)r->via > (uintptr_t)CP_VIA_MIXED ? r->via : NULL;
}

/* 1 when e is an edge record (not none, not virtual). */
static inline int cp_edge_real(const struct cp_erec *e)
{
	return (uintptr_t)e > (uintptr_t)CP_EDGE_VIRTUAL;
}

/* The four numbers of one caller->callee edge in one context (cProfile's subentry). */
struct cp_erec {
	struct cp_rec *caller, *callee;
	uint64_t nc, cc;
	uint64_t tt, ct; /* ns */
	uint32_t level;
	uint32_t snap_idx; /* the dumper's scratch (snapshot.c) */
};

struct cp_frame {
	struct cp_rec *rec;
	struct cp_erec *edge; /* NULL: no caller in its context; or CP_EDGE_VIRTUAL */
	uint64_t start;	      /* ns, on the context's virtual clock */
	uint64_t children;    /* ns, elapsed time of closed children */
};

/* An open-addressing table of record pointers (keyed by function key, or by the
 * caller/callee pair for edges). Its slots live in the thread's pool. */
struct cp_table {
	void **slots;
	uint32_t cap; /* a power of two, or 0 */
	uint32_t n;
};

/* A context: the thread's own, its aggregate, or one per task (coroutine, fiber). A
 * live task costs this (its name follows it in the same allocation), its records and
 * tables, and a frame stack fitted to its open frames when it is switched out
 * (cp_ctx_stack_trim). */
struct coprof_ctx {
	struct coprof_thread *t;
	struct cp_frame *frames; /* NULL (cap 0) while empty, once switched out */
	uint32_t depth, cap;
	uint32_t lost;	/* calls above the stack (cap or memory): leaves pop these first */
	uint32_t msize; /* bytes counted against the memory limit */
	struct cp_table recs, edges;
	/* The virtual clock: virtual = thread clock - offset. `away` is the thread clock
	 * when the context was last switched out (or when recording stopped). */
	uint64_t offset, away;
	uint64_t vbegin, vend; /* ns, virtual: first resume, finish */
	uint64_t resumes;
	uint64_t id;
	char *name; /* just after the context (ctx_new), or malloc'd (coprof_ctx_set_name) */
	struct coprof_ctx *next;   /* the thread's contexts, in creation order */
	struct coprof_ctx *fnext;  /* the thread's finished contexts, oldest first */
	struct coprof_ctx *idnext; /* the thread's task-id hash chain */
	uint8_t state;		   /* enum cp_ctx_state */
	uint8_t begun, is_base, is_agg, folded, in_ids;
	char runtime[16];
	/* Rule 12, in ns: its steps on both clocks; the wall time it sat ready, in all and
	 * the longest once; the wall clock when it became ready (0: it is not ready),
	 * when it last stopped, and when its window's life began and ended. */
	uint64_t run_cpu, run_wall;
	uint64_t ready, ready_max;
	uint64_t ready_at, wall_away;
	uint64_t wall_begin, wall_end;
	uint8_t is_ready;
};

/* A call-cache entry: in context c, the function with record `parent` calling `key`
 * found (rec, edge). Records are unique per context, so `parent` identifies it. */
struct cp_call {
	struct cp_rec *parent;
	uintptr_t key;
	struct cp_rec *rec;
	struct cp_erec *edge;
};
#define CP_CALL_CACHE 256 /* entries per thread, a power of two */

/* A stall as the thread that saw it keeps it: the task, the step's length, and the
 * stack of its longest point, innermost first. */
struct cp_stall_rec {
	uint64_t ns; /* on the thread's clock */
	uint64_t ctx_id;
	uint32_t behind; /* tasks ready at its end, or made ready later as due before it */
	uint32_t gen;	 /* the thread's stall_gen when it was kept */
	char name[48];
	uint32_t depth;
	uintptr_t keys[CP_STALL_FRAMES];
	/* Sample mode: the step's ticks kept (their stacks are the thread's stall_ticks,
	 * CP_STEP_TICKS from this record's index on); `behind` is not known (UINT32_MAX). */
	uint32_t nticks;
};

/* A tick's stack, innermost first, as a step in sample mode keeps it. */
struct cp_tick_stack {
	uint32_t depth;
	uintptr_t keys[CP_STALL_FRAMES];
};

/* An await edge as the thread that saw it keeps it: who waited on whom, how, how often
 * and how long (wall), with both tasks' names when the edge was first seen. */
struct cp_await_rec {
	uint64_t waiter, awaited; /* task ids */
	uint64_t count;
	uint64_t ns; /* wall, summed */
	uint32_t kind; /* enum coprof_await_kind */
	uint32_t hash; /* of its key, for the index (engine-await.c) */
	char wname[40], aname[40];
};

struct coprof_thread {
	_Atomic uint32_t seq; /* odd while the thread is inside an event section */
	uint32_t seen;	      /* the state word this thread last began recording under */
	struct coprof *p;
	struct coprof_ctx *cur; /* the running context */
	coprof_clock_fn fake;
	void *fake_arg;
	int cpu;       /* the clock is a CPU clock */
	int fence;     /* no membarrier: writers pay a full fence */
	uint64_t last; /* ns: the last clock reading on this thread */
	struct cp_clock clock;
	/* The running task's step (rule 11): it began at thread clock step_begin, virtual
	 * step_vbegin; the longest call closed in it that began in it took step_long ns;
	 * step_keys (step_depth frames) holds the stack of the innermost long one (see
	 * cp_step_longest). While no step is open (the
	 * thread's own context runs) step_long is UINT64_MAX, so a leave never looks;
	 * a step starts it at half the stall threshold, so only a call that could be a
	 * stall's longest point is looked at (cp_step_longest, engine-inline.h). */
	uint64_t step_long;
	uint64_t step_begin, step_vbegin;
	uint32_t step_depth;
	/* The call whose stack step_keys holds: its length, stack depth and virtual start;
	 * and the stack depth of the longest call (step_long), which encloses it when
	 * longer (cp_step_longest). */
	uint64_t step_klen, step_kstart;
	uint32_t step_kdepth, step_long_depth;
	uint8_t step_open;
	uintptr_t step_keys[CP_STALL_FRAMES];
	struct cp_stall_rec *stalls; /* CP_STALLS_KEPT of them, from the pool at the first */
	uint32_t nstalls;
	uint64_t stalls_dropped; /* stalls seen past the kept ones */
	/* Sample mode (rule 11): the open step's ticks, step_nticks of CP_STEP_TICKS kept,
	 * one in step_stride of the step_seen ticks so far (the stride doubles as the
	 * buffer fills, so the kept ones spread over the whole step); and the kept stalls'
	 * ticks (CP_STALLS_KEPT * CP_STEP_TICKS). Both from the pool, at the first step. */
	struct cp_tick_stack *step_ticks, *stall_ticks;
	uint32_t step_nticks, step_stride, step_seen;
	/* Await edges (engine-await.c): records and an open-addressing index over them
	 * (record index + 1; twice as many slots as records), both from the pool. */
	struct cp_await_rec *awaits;
	uint32_t *await_slots;
	uint32_t nawaits, cawaits;
	uint64_t awaits_dropped; /* waits of new edges past CP_AWAITS_KEPT (or memory) */
	/* Rule 12: the clock of the other kind, set up at the first task switch that needs
	 * it (never under a fake clock, which stands for both); both clocks' readings when
	 * the running task was switched in; the wall clock when this recording run began;
	 * how many of the thread's tasks are ready; the stall kept last (its index and
	 * gen) and the wall clock at its end, which a task made ready later may have
	 * waited behind. */
	struct cp_clock other;
	uint8_t other_on;
	uint64_t other_last;
	uint64_t in_cpu, in_wall;
	uint64_t rec_wall;
	uint32_t nready;
	/* Something told this thread that a task became ready (coprof_ctx_ready): only then
	 * does a trace-mode stall know the tasks behind it (else -1: the native adapters
	 * never say, and 0 would claim that none waited). */
	uint8_t ready_seen;
	uint32_t stall_gen, last_stall;
	uint8_t step_kept; /* the step that ended last was kept as a stall */
	uint64_t last_stall_wall;
	struct cp_pool pool;
	/* Behind each record's one-entry cache: calls seen lately on this thread. Wiped
	 * whenever records are freed (cp_ctx_release, clear). */
	struct cp_call calls[CP_CALL_CACHE];
	struct coprof_ctx base; /* the thread's own context: the driver (rule 9) */
	struct coprof_ctx agg;	/* "(finished tasks)": folded finished contexts */
	struct coprof_ctx *ctx_head, *ctx_tail;
	/* Contexts another thread made for this one's sampled stacks
	 * (coprof_ctx_create_sampled): a list of their own, changed under p->lock only. */
	struct coprof_ctx *sctx_head, *sctx_tail;
	struct coprof_ctx *fin_head, *fin_tail;
	uint32_t nfin_kept;
	uint64_t nfolded;
	/* task id -> context, for coprof_task_switch (malloc'd, survives clear) */
	struct coprof_ctx **ids;
	uint32_t ids_cap, ids_n;
	uint64_t tid;
	char name[64];
	uint64_t ttot;	    /* ns, profiled time on this thread's clock, closed runs */
	uint64_t run_begin; /* ns, thread clock when the current run began here */
	uint64_t switches;
	uint64_t lost_depth; /* calls not recorded: stack depth cap */
	uint64_t foreign;    /* switches to another thread's context, ignored */
	int recorded;
	int exited;
	struct coprof_thread *next;
};

struct cp_resolver {
	coprof_resolve_fn fn;
	void *arg;
};

struct cp_dropped {
	char what[48];
	uint64_t n;
};

struct cp_samples;

struct coprof {
	_Atomic uint32_t state; /* generation | CP_RECORDING | CP_PAUSED */
	struct coprof_options opt;
	int fence;		 /* membarrier unavailable */
	_Atomic size_t mem_used; /* bytes taken by every thread's pool and contexts */
	_Atomic int overflow;	 /* sticky: a limit was hit */
	_Atomic int recorded;	 /* an event was recorded since create or clear */
	_Atomic int stepped;	 /* sample mode: a step began since create or clear (rule 11) */
	int started;		 /* between start and stop (even after an overflow) */
	uint64_t uid;		 /* unique per profiler, for the TLS cache */
	pthread_mutex_t lock;	 /* threads list, names, resolvers, notes; held by control ops */
	pthread_mutex_t sample_lock;
	struct coprof_thread *threads;
	struct cp_resolver resolvers[CP_MAX_RESOLVERS];
	unsigned nresolvers;
	char **notes;
	unsigned nnotes;
	struct cp_dropped *dropped;
	unsigned ndropped;
	struct cp_samples *samples;
	double start_epoch, stop_epoch; /* s since the epoch */
	uint64_t last_pause_ns;		/* CLOCK_MONOTONIC ns the writers were held by the last
					 * snapshot (bench/fleet/pause-cost reads it) */
};

/* Rule 12's numbers of one task, in ns (wall unless said): its steps on each clock,
 * its ready time in all and the longest once, and its life in the window. */
struct cp_task_time {
	uint64_t run_cpu, run_wall, ready, ready_max, life;
};

/* engine.c */
void cp_pause(struct coprof *p);
void cp_unpause(struct coprof *p);
/* The calling thread's estimate of thread t's clock now (see engine.c). */
uint64_t cp_thread_now(struct coprof_thread *t, uint64_t self_tid);
int cp_thread_active(const struct coprof_thread *t, uint32_t state);
void cp_overflow(struct coprof *p, const char *what);

/* engine-event.c */
void cp_wait_unpaused(struct coprof_thread *t);
/* Starts recording on t under state word st (the thread's first event of a run).
 * Returns nonzero when the event should be recorded. */
int cp_thread_begin(struct coprof_thread *t, uint32_t st);
/* Ends recording on t for good, as if it had exited, leaving its frames as they are:
 * its clock was set up in another process. */
void cp_thread_orphaned(struct coprof_thread *t);
/* Closes every open frame of every context of t at its clock `now` and ends the
 * thread's recording run (stop, thread exit). */
void cp_thread_end(struct coprof_thread *t, uint64_t now);
/* Closes every open frame of c at thread clock `now` (mutating the records). */
void cp_ctx_close_all(struct coprof_ctx *c, uint64_t now);
/* Virtual time of c when its thread clock reads `now`. */
uint64_t cp_ctx_vnow(const struct coprof_ctx *c, uint64_t now);
struct cp_rec *cp_rec_get(struct coprof_ctx *c, uintptr_t key);
struct cp_erec *cp_edge_get(struct coprof_ctx *c, struct cp_rec *caller, struct cp_rec *callee);
void cp_ctx_fold(struct coprof_ctx *into, struct coprof_ctx *c);
void cp_ctx_release(struct coprof_ctx *c);
/* Fits c's frame stack to its frames when c is switched out or finishes: an empty
 * stack goes back to the thread's pool, one a quarter full or less shrinks (to twice
 * its depth or more), so that a suspended task holds no more than its few suspended
 * frames need. Its next push grows it again. */
void cp_ctx_stack_trim(struct coprof_ctx *c);

/* engine-ctx.c: rule 12's numbers of t's context c, as the calling thread sees them
 * when t's clock reads `now` (another thread's CPU clock reads as its last value);
 * `active`: t records now. The wall clock of t when its clock reads `now`, the same
 * way. */
void cp_task_time(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t now, int active,
		  struct cp_task_time *out);
uint64_t cp_wall_seen(struct coprof_thread *t, uint64_t now);
/* A recording run of t begins (its own thread) or ends (any thread) at its clock
 * `now`: the running task's step starts or closes there for rule 12. */
void cp_task_run_begin(struct coprof_thread *t, uint64_t now);
void cp_task_run_end(struct coprof_thread *t, uint64_t now);

/* snapshot.c: the profile as it stands now (open frames closed at this instant in the
 * copy only). Takes p->lock and pauses writers while copying; calls the resolvers
 * afterwards with no lock held (they may take locks of their own). 0 or -errno. */
int cp_snapshot(struct coprof *p, struct cp_profile **out);
/* The same; with `clear`, also forgets everything (as coprof_clear) in the same pause
 * of the writers and takes the sample store over, so that no event falls between
 * this snapshot and the next. The data is dropped even when the snapshot fails. */
int cp_snapshot_take(struct coprof *p, int clear, struct cp_profile **out);
/* coprof_clear's work, with p->lock held and the writers paused. */
void cp_clear_paused(struct coprof *p);

/* Text of a key nobody resolves: "0x<hex>". */
void cp_key_unknown(uintptr_t key, char *buf, size_t len);

#endif
