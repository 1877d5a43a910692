/* coprof.h: the public C API of libcoprof, the coroutine-aware profiling engine.
 *
 * The engine only accounts. Adapters (the LD_PRELOAD shim, the CPython adapter, or a
 * program of yours) translate their runtime's events into the calls below. Every call
 * that can fail returns 0 or a negative errno; results come through out-parameters.
 * Conditions of the API itself (nothing recorded, a table full, an output path that
 * is not a regular file) have codes of their own, COPROF_E*, far below any errno, so
 * that an errno always keeps the OS's meaning. coprof_strerror reads both.
 * Event calls (enter, leave, switch) return nothing: errors there become sticky flags
 * reported once on stderr and in the file's extras. See libcoprof(3). "DESIGN rule N"
 * is rule N of the accounting rules in doc/design.md of coprof's source. */
#ifndef COPROF_H
#define COPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API's own error codes: name, value, message. Errnos stop at 4095 on Linux. */
#define COPROF_ERRORS(X)                                                                           \
	X(COPROF_ENODATA, -10001, "no event was recorded")                                         \
	X(COPROF_ETOOMANY, -10002, "too many resolvers")                                           \
	X(COPROF_ENOTASK, -10003, "no such task")                                                  \
	X(COPROF_EDEVICE, -10004, "it is a device, not a regular file; nothing was written")       \
	X(COPROF_EFIFO, -10005, "it is a FIFO, not a regular file; nothing was written")           \
	X(COPROF_ESOCKET, -10006, "it is a socket, not a regular file; nothing was written")       \
	X(COPROF_ELINK, -10007,                                                                    \
	  "it is a symbolic link to something other than a regular file; nothing was written")     \
	X(COPROF_ENOFOLLOW, -10008,                                                                \
	  "it is a symbolic link, and a process that dropped its privileges writes through "       \
	  "none; nothing was written")

enum coprof_error {
#define COPROF_ERROR_ENUM(name, value, text) name = value,
	COPROF_ERRORS(COPROF_ERROR_ENUM)
#undef COPROF_ERROR_ENUM
};

#if defined(__GNUC__)
#define COPROF_API __attribute__((visibility("default")))
#else
#define COPROF_API
#endif

struct coprof;	      /* one profiler: configuration, threads, the profile */
struct coprof_thread; /* one OS thread registered with a profiler */
struct coprof_ctx;    /* one context other than a thread's own: a coroutine, a task */

enum coprof_clock {
	COPROF_CLOCK_WALL = 0, /* monotonic: time spent suspended counts */
	COPROF_CLOCK_CPU = 1,  /* the thread's CPU time, split between its contexts */
};

enum coprof_mode {
	COPROF_MODE_TRACE = 0,	/* every call seen (enter/leave events) */
	COPROF_MODE_SAMPLE = 1, /* stacks sampled by a timer (coprof_sample) */
};

/* A clock for tests: returns nanoseconds. Under COPROF_CLOCK_CPU the engine treats
 * it as the calling thread's CPU clock, under COPROF_CLOCK_WALL as the wall clock. */
typedef uint64_t (*coprof_clock_fn)(void *arg);

struct coprof_options {
	enum coprof_clock clock;
	enum coprof_mode mode;
	size_t memory_limit;	    /* bytes for all recorded data; 0: 256 MiB */
	unsigned hz;		    /* sampling rate, recorded in the extras */
	/* A task step (resume to suspension) at least this long on the profile's clock is
	 * a stall, kept with its stack (doc/design.md rule 11); 0: 20 ms. */
	uint64_t stall_ns;
	coprof_clock_fn fake_clock; /* NULL: the real clock chosen by `clock` */
	void *fake_clock_arg;
};

/* What a function key stands for, as pstats keys it: (file, line, name). */
struct coprof_func_info {
	const char *file;
	unsigned line;
	const char *name;
};

/* Turns an adapter's opaque key (an address, a code object) into a function. Called
 * at dump time, from the dumping thread. Returns 0 and fills *out (the engine copies
 * the strings before the next call), or -ENOENT when this resolver does not know the
 * key; the next resolver is then tried, and a key nobody knows is written as
 * ("~", 0, "0x<key>"). */
typedef int (*coprof_resolve_fn)(void *arg, uintptr_t key, struct coprof_func_info *out);

/* --- the profiler ---------------------------------------------------------------- */

COPROF_API int coprof_create(const struct coprof_options *opt, struct coprof **out);
/* Destroys a stopped profiler. Threads must no longer send events. */
COPROF_API void coprof_destroy(struct coprof *p);
COPROF_API int coprof_start(struct coprof *p);
/* The window began now, not at coprof_start: for a caller whose runtimes begin
 * recording some time after it (the CPython adapter waits for the GIL to put its hook
 * on), so the start time written in the file is when recording really began. Ignored
 * when not started. */
COPROF_API int coprof_mark_start(struct coprof *p);
/* Stops recording. Frames still open are closed at this instant and counted. */
COPROF_API int coprof_stop(struct coprof *p);
COPROF_API int coprof_is_running(const struct coprof *p);
/* Forgets all recorded data (functions, tasks, stacks); keeps threads registered. */
COPROF_API int coprof_clear(struct coprof *p);
/* Writes the profile to `path` (a temporary name in the same directory, then rename).
 * Works while running: open frames are counted as closed at the dump instant, and
 * recording goes on. Returns COPROF_ENODATA, and writes nothing, when no event was ever
 * recorded. Only a regular file (or nothing) at `path` is replaced: a device, FIFO or
 * socket gives COPROF_EDEVICE/EFIFO/ESOCKET and a directory -EISDIR, writing nothing.
 * A symbolic link to a regular file is written through: the file it names is
 * replaced and the link stays (COPROF_ELINK for a link to anything else). OS errors
 * come back as -errno. No temporary file is left behind on any error. */
COPROF_API int coprof_dump(struct coprof *p, const char *path);
/* Resolvers are tried in the order added; COPROF_ETOOMANY past the table's size. */
/* coprof_dump, then coprof_clear, with nothing recorded in between: the writers are
 * paused once, while the numbers are copied and cleared (not while the file is
 * written), so consecutive calls cut a running profile into back-to-back windows.
 * Frames open at the cut are counted in this window up to the cut (as by
 * coprof_dump) and ignored when they close in a later one. The data is cleared even
 * if writing fails. COPROF_ENODATA (nothing cleared, nothing written) when no event was
 * recorded since the last clear. */
COPROF_API int coprof_dump_clear(struct coprof *p, const char *path);
/* The same file written to the open descriptor `fd` from its offset, with no temporary
 * and no rename: for a caller that publishes it itself (the preload shim hands a
 * process's profile to a helper that still may write where the process may not).
 * With `clear`, as coprof_dump_clear; otherwise as coprof_dump. -errno on a write
 * error; COPROF_ENODATA (nothing written) when no event was recorded. */
COPROF_API int coprof_dump_fd(struct coprof *p, int fd, int clear);
COPROF_API int coprof_add_resolver(struct coprof *p, coprof_resolve_fn fn, void *arg);
/* Metadata for the extras. The command line defaults to /proc/self/cmdline. */
COPROF_API int coprof_set_note(struct coprof *p, const char *note);
/* The first note that starts with `prefix` becomes `note` (added when there is none):
 * for a note that states what holds in the window being recorded (notes outlive a
 * dump). */
COPROF_API int coprof_replace_note(struct coprof *p, const char *prefix, const char *note);
COPROF_API void coprof_count_dropped(struct coprof *p, const char *what, uint64_t n);
/* From now on, threads set up no TSC clock, whose perf page costs a perf_event_open
 * (which a seccomp filter may punish with death), but the kernel's clock of `kind`. */
COPROF_API void coprof_clock_no_perf(enum coprof_clock kind);
/* Nonzero once a limit was hit and recording stopped (the sticky flag). */
COPROF_API int coprof_overflowed(const struct coprof *p);

/* --- threads --------------------------------------------------------------------- */

/* Registers the calling thread. Its data outlives the thread; its tid is gettid(). */
COPROF_API int coprof_thread_register(struct coprof *p, const char *name,
				      struct coprof_thread **out);
/* The calling thread is exiting: its stacks are closed, its data kept for the dump. */
COPROF_API void coprof_thread_exit(struct coprof_thread *t);
COPROF_API int coprof_thread_set_name(struct coprof_thread *t, const char *name);

/* --- events (hot path: no allocation, no lock, no syscall on the common path) ---- */

/* A call of `key` in the thread's current context. */
COPROF_API void coprof_enter(struct coprof_thread *t, uintptr_t key);
/* A resumed segment of a call already counted (a generator resumed by a consumer in
 * the same context, DESIGN rule 6): pushes a frame, counts no call. */
COPROF_API void coprof_resume(struct coprof_thread *t, uintptr_t key);
/* A return (or a generator's yield) from `key`. When the top frame is not `key`, the
 * stack is reconciled by key: frames above the innermost `key` are closed too (a
 * longjmp); a key not on the stack is ignored (profiling began mid-stack). */
COPROF_API void coprof_leave(struct coprof_thread *t, uintptr_t key);
/* coprof_resume and coprof_leave at the instant of the thread's previous event, with
 * no clock read: for an event that follows the previous one with nothing of the
 * program's to time between them (a generator resumed by the one that delegates to
 * it, a yield passed up through a `yield from`). */
COPROF_API void coprof_resume_again(struct coprof_thread *t, uintptr_t key);
COPROF_API void coprof_leave_again(struct coprof_thread *t, uintptr_t key);

/* --- contexts ---------------------------------------------------------------------- */

/* Creates a context on the calling thread. `id` is the runtime's identity (a task
 * address, a ucontext_t address), `runtime` a short word ("ucontext", "asyncio"). */
COPROF_API int coprof_ctx_create(struct coprof_thread *t, uint64_t id, const char *name,
				 const char *runtime, struct coprof_ctx **out);
COPROF_API int coprof_ctx_set_name(struct coprof_ctx *c, const char *name);
/* Makes `c` the running context of thread `t` (NULL: the thread's own context).
 * Pushes and pops nothing; moves the virtual clocks (DESIGN rules 4, 5, 9). */
COPROF_API void coprof_ctx_switch(struct coprof_thread *t, struct coprof_ctx *c);
/* The context finished: its open frames are closed now; it leaves the running set. If
 * it was running, the thread's own context runs again. `c` stays valid until clear. */
COPROF_API void coprof_ctx_finish(struct coprof_thread *t, struct coprof_ctx *c);
/* DESIGN rule 12: `c`, suspended, can run again: what it waited for completed, or it
 * was scheduled, at wall clock `since` (CLOCK_MONOTONIC ns; under a fake clock, its
 * ns; 0 or later than now: now). It sits ready until its next resume. A context that
 * is ready already keeps its earlier instant; the running one, a finished one or
 * another thread's is left alone. Calling thread = t. */
COPROF_API void coprof_ctx_ready(struct coprof_thread *t, struct coprof_ctx *c, uint64_t since);
/* DESIGN rule 11: a step an event loop runs on the thread's own context, from begin to
 * end: a loop callback that is no task's step (a protocol's data_received, a
 * call_later callback: task_id 0, `name` the callback's), or, in sample mode, where
 * the engine does not switch to the tasks it samples, a task's step (its id; `name`
 * NULL: the task table's name for it). A stall's record keeps them (name copied).
 * Nothing happens while a task runs; a task switched in meanwhile ends the step
 * unmeasured, and a begin while one is open starts it over. Calling thread = t. */
COPROF_API void coprof_loop_step_begin(struct coprof_thread *t);
/* 1 when the step was kept as a stall (coprof_stall_behind may then say more), else 0. */
COPROF_API int coprof_loop_step_end(struct coprof_thread *t, uint64_t task_id, const char *name);
/* The stall thread t kept last had `n` tasks ready behind it, as an adapter that sees
 * no task become ready (sample mode) counted them at its end; unknown otherwise (-1 in
 * the file). Calling thread = t, right after the coprof_loop_step_end that kept it
 * (after any other step's end it does nothing). */
COPROF_API void coprof_stall_behind(struct coprof_thread *t, uint32_t n);
/* Sample mode (rule 11): a tick of thread t's, its stack innermost first, for the
 * stall the open step may be: a step keeps CP_STEP_TICKS of its ticks' stacks, spread
 * over it, and a stall's stack is the innermost frame at least half of them share.
 * Async-signal-safe: called by t itself, in its tick's handler. */
COPROF_API void coprof_step_tick(struct coprof_thread *t, const uintptr_t *pcs, unsigned depth);
COPROF_API struct coprof_ctx *coprof_ctx_current(const struct coprof_thread *t);
/* Sample mode: a context of thread `t` made from another thread (the shim's folding
 * thread, for a stack it found in t's samples). It never runs as far as the engine
 * knows and holds only what coprof_sample charges to it (its ttot is its samples'
 * time), so making or finishing one never races t's own events. It is in the task
 * table like any context; coprof_ctx_finish_sampled marks it finished. */
COPROF_API int coprof_ctx_create_sampled(struct coprof_thread *t, uint64_t id, const char *name,
					 const char *runtime, struct coprof_ctx **out);
COPROF_API void coprof_ctx_finish_sampled(struct coprof_ctx *c);

/* --- who awaits whom ----------------------------------------------------------------- */

/* How a task came to wait on another (doc/python.md, "Who awaits whom"). */
enum coprof_await_kind {
	COPROF_AWAIT_TASK = 0,	    /* it awaited the task itself */
	COPROF_AWAIT_GATHER = 1,    /* a gather() of which the task is a child */
	COPROF_AWAIT_TASKGROUP = 2, /* the end of a TaskGroup the task belongs to */
	COPROF_AWAIT_SHIELD = 3,    /* a shield() around the task */
	COPROF_AWAIT_WAIT = 4,	    /* asyncio.wait() on futures the task is one of, or
				     * wait_for() on it (before 3.12) */
	COPROF_AWAIT_KINDS
};

/* Task `waiter` (a context of thread t) waited `ns` of wall time on the task whose id
 * is `awaited_id` (named `awaited`, or NULL when unknown), one wait more of that kind.
 * Each thread keeps its edges, one per (waiter, awaited, kind, names), in a bounded
 * table; a full table lets its shorter half go, and counts their waits as dropped.
 * Called by the thread itself, never in a signal handler. */
COPROF_API void coprof_await_add(struct coprof_thread *t, const struct coprof_ctx *waiter,
				 uint64_t awaited_id, const char *awaited,
				 enum coprof_await_kind kind, uint64_t ns);

/* --- sampling (COPROF_MODE_SAMPLE) -------------------------------------------------- */

/* Adds one sampled stack, innermost frame first, to context `c` of thread `t` (NULL:
 * the thread's own context), weighing `period_ns`. `waiting` is 1 when the stack is
 * where a suspended coroutine waits (wall clock), 0 when it was running. Any thread
 * may call it (the store takes a lock: the shim's folding thread, and the Python
 * adapter's scan for asyncio waits), never a signal handler. */
COPROF_API void coprof_sample(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
			      unsigned depth, uint64_t period_ns, int waiting);
/* coprof_sample `count` times over, in one call: the ticks a suspended coroutine waited
 * at one stack are charged at once (the same numbers as `count` calls). */
COPROF_API void coprof_sample_n(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
				unsigned depth, uint64_t period_ns, uint64_t count, int waiting);

/* --- the process-wide default profiler, for code that annotates its own switches -- */

COPROF_API void coprof_set_default(struct coprof *p);
COPROF_API struct coprof *coprof_default(void);
/* The calling thread's coprof_thread for the default profiler, registered on first
 * use (NULL when there is no default profiler or registration failed). */
COPROF_API struct coprof_thread *coprof_thread_self(void);
/* For runtimes with their own switch code: switch the calling thread to the task
 * `task_id` (0: the thread's own context), creating it, named `name`, on first sight.
 * coprof_task_finish marks it finished (COPROF_ENOTASK for a task never seen). Both
 * are no-ops without a default profiler. */
COPROF_API int coprof_task_switch(uint64_t task_id, const char *name);
COPROF_API int coprof_task_finish(uint64_t task_id);

/* The message for a code returned by this API: COPROF_E* codes have their own, and
 * a negative errno reads as strerror says it. */
COPROF_API const char *coprof_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
