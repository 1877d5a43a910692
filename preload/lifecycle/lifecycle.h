/* lifecycle.h: the top of libcoprof-preload.so, what happens to the process's profile
 * over the process's life. The constructor (constructor.c) reads the environment,
 * makes the profiler and starts everything below; the control thread (control.c)
 * starts, stops and dumps on toggles and windows (interval.c); exec, fork, exit and
 * credential changes (exec.c, fork.c, exit.c, creds.c) each end or hand over a window;
 * publish.c makes each dump a file. Only the constructor and destructor, the control
 * thread and the interposers of those calls run here. */
#ifndef PL_LIFECYCLE_H
#define PL_LIFECYCLE_H

#include <limits.h>
#include <stddef.h>

#include "service/service.h"
#include "state/state.h"

/* --- control.c: starting, stopping and dumping, serialised by one mutex ------------- */

PL_HIDDEN int pl_control_init(void);   /* the pipe and the control thread */
/* The same for `coprof attach` (attach.c), whose requests come through the pipe alone:
 * no toggle signal, and the control thread all the same, which also calls `rebind`
 * every PL_REBIND_MS at most while a window is open (the interposers bound into the
 * objects the program loaded since: bind.c). */
#define PL_REBIND_MS 100
PL_HIDDEN int pl_control_init_attached(void (*rebind)(void));
PL_HIDDEN void pl_control_start(void); /* start profiling now */
/* The control pipe's write end, its number and inode (-1 while there is none): `coprof
 * toggle`, `attach` and `detach` write their requests there, through /proc/PID/fd,
 * rather than send the toggle signal, whose handler would end a sleep of the
 * program's early (EINTR). Read from outside through /proc/PID/mem. */
extern PL_EXPORT int coprof_control_pipe_fd;
extern PL_EXPORT unsigned long long coprof_control_pipe_ino;
PL_HIDDEN void pl_control_exit(void);  /* at exit: stop, dump, say what is missing */
/* exec.c's around exec: stop and dump (1: was on, 0: off, -1: gave up), puts in
 * `state` what the next image takes over (PL_EXEC_ENV); then, if exec failed, remove
 * that file and go on in the same window. At start, the image after exec adopts the
 * state, and once configured does the COPROF_KEEP removal left to it. */
PL_HIDDEN int pl_control_exec_prepare(char *state, size_t len);
PL_HIDDEN void pl_control_exec_failed(int was_running);
PL_HIDDEN void pl_control_adopt_exec(const char *state);
PL_HIDDEN void pl_control_exec_keep(void);
/* fork.c's handlers: the control lock is held across fork; the child gets a new
 * profiler, pipe and control thread. */
PL_HIDDEN void pl_control_fork_prepare(void);
PL_HIDDEN void pl_control_fork_parent(void);
PL_HIDDEN void pl_control_fork_child(void);
/* For the Python adapter's os.fork callbacks (lent to it, runtime.h), called without
 * the GIL: pause stops the shim's own threads before the fork; resume, in the parent
 * and in the child after it, starts them again. Pauses nest. */
PL_HIDDEN void pl_control_fork_pause(void);
PL_HIDDEN void pl_control_fork_resume(void);
/* Around a credential change (creds.c): the shim's threads stop and start again from
 * the thread that made it. */
PL_HIDDEN void pl_control_threads_pause(void);
PL_HIDDEN void pl_control_threads_resume(void);

/* For the Python API (api.c), under the same lock: a window's start and stop as a
 * toggle's (the stop also writes `snap` for the API), a dump of the data so far, and
 * clearing it while stopped. */
PL_HIDDEN int pl_control_api_start(void);
PL_HIDDEN int pl_control_api_stop(const char *snap, int *dumped);
PL_HIDDEN int pl_control_api_dump(const char *path);
PL_HIDDEN int pl_control_api_clear(void);

/* --- api.c: the Python API's doors, exported (package/_coprof.c finds them by name) -- */

PL_EXPORT int coprof_api_preloaded(void);
PL_EXPORT int coprof_api_setup(int wall, int builtins, char *err, size_t errlen);
PL_EXPORT unsigned coprof_api_state(void);
PL_EXPORT int coprof_api_start(void);
PL_EXPORT int coprof_api_stop(const char *snap, int *dumped);
PL_EXPORT int coprof_api_dump(const char *path);
PL_EXPORT int coprof_api_clear(void);
PL_EXPORT const char *coprof_api_strerror(int rc);

/* --- attach.c: `coprof attach`'s entry, called by its trampoline (viewer/inject*) -- */

PL_EXPORT int coprof_attach_entry(const char *options);
PL_EXPORT int coprof_attach_thread(const char *unused);

extern PL_EXPORT char coprof_attach_out[PATH_MAX];
extern PL_EXPORT unsigned coprof_attach_calls;
extern PL_EXPORT unsigned coprof_attach_sampled;
extern PL_EXPORT int coprof_attach_cancel;

/* --- exec.c ------------------------------------------------------------------------ */

#define PL_EXEC_ENV "COPROF_EXEC_STATE"
/* At start: takes PL_EXEC_ENV out of the environment and adopts its state. */
PL_HIDDEN void pl_exec_init(void);

/* --- fork.c ------------------------------------------------------------------------ */

/* At start: the shim's handlers around fork. */
PL_HIDDEN void pl_fork_init(void);

/* --- interval.c: periodic windows (COPROF_INTERVAL, COPROF_KEEP), driven by the
 * control thread, always under its lock -------------------------------------------- */

/* Profiling started (a window opens now) or stopped (no window is open). */
PL_HIDDEN void pl_interval_open(void);
PL_HIDDEN void pl_interval_close(void);
/* How long the control thread may wait for a toggle before the open window is due:
 * milliseconds for poll(2); -1 (forever) without COPROF_INTERVAL; one interval when
 * no window is open. */
PL_HIDDEN int pl_interval_wait_ms(void);
/* The open window is due: writes it as dump number `n` of this process (`child`: a
 * forked child, for the file name) through coprof_dump_clear, so recording goes on
 * into the next window with nothing lost between them, and opens the next window.
 * Returns 1 when a file was written (the number is used), 0 otherwise (not due, no
 * event in the window, or an error, said once on stderr with the OS's reason). */
PL_HIDDEN int pl_interval_write_due(unsigned n, int child);
/* After dump number `n` was written: with COPROF_KEEP=K, removes dump number n - K,
 * so only the newest K files stay. */
PL_HIDDEN void pl_interval_keep(unsigned n, int child);

/* --- publish.c: a dump becomes a file -------------------------------------------------- */

/* The path of dump number `n` (`child`: of a forked child) into `path`: 0, or
 * -ENAMETOOLONG. */
PL_HIDDEN int pl_publish_path(unsigned n, int child, char path[PATH_MAX]);
/* Writes dump number `n` of pl_prof to `path`, as coprof_dump (coprof_dump_clear with
 * `clear`) does, or through the route in place. Same returns. Under control.c's lock. */
PL_HIDDEN int pl_publish_dump(const char *path, unsigned n, int child, int clear);
/* Removes dump number `n` at `path` (COPROF_KEEP, a failed exec's file): 0 (also when
 * there was nothing), -errno. */
PL_HIDDEN int pl_publish_remove(const char *path, unsigned n, int child);
/* Another way to publish, for a process that can no longer write the directory itself
 * (creds.c's keeper): dump and remove as above, or 1 when they leave the file to the
 * process after all (the directory is writable now). NULL: none (every dump's case but
 * a process that changed its credentials). */
struct pl_publish_route {
	int (*dump)(unsigned n, int child, int clear);
	int (*remove)(unsigned n, int child);
};
PL_HIDDEN void pl_publish_route(const struct pl_publish_route *r);

/* --- creds.c: processes that change their credentials ---------------------------------- */

/* At start (the constructor): finds coprof-keeper next to the shim. */
PL_HIDDEN void pl_creds_init(void);
/* In the parent, just before fork: whether it takes orphans, for the child. */
PL_HIDDEN void pl_creds_fork_prepare(void);
/* In a forked child, right after fork. */
PL_HIDDEN void pl_creds_fork_child(void);

/* --- the toggle signal: installed by toggle-install.c, handled by toggle-handler.c ---- */

/* The pipe's write end (non-blocking, close-on-exec); none while there is none. */
extern PL_HIDDEN struct pl_fd pl_toggle_fd;
/* Installs the toggle signal's handler, unless the program has one for `signo`. */
PL_HIDDEN void pl_toggle_install(int signo);
/* The toggle signal while the shim's handler is installed; 0 once the program took it
 * over (or never: COPROF_SIGNAL=none). */
PL_HIDDEN int pl_toggle_armed(void);

#endif
