/* sampler.c: sample mode (COPROF_MODE=sample): per-thread tick sources and the folding
 * thread.
 *
 * pl_sampler_init (the shim's constructor) chooses where ticks come from (perf events,
 * raising SIGTRAP; else, under cpu, CPU-time timers on a free real-time signal) and
 * installs the tick handler; each thread, in its thread_start hook, opens its own
 * events or timers and warms libunwind outside any signal. The folding thread wakes every few
 * milliseconds, drains every thread's ring into the engine (coprof_sample) and charges suspended
 * coroutines their waits. start/stop run on the shim's control thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler.h"

#define FOLD_NS 10000000u /* ns between folds: 10 ms */

static unsigned kernel_hz(void);
static void reopen_lost(void);


static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* threads, folding */
/* Held by the folding thread around a fold and by fork: the child never inherits a list
 * of threads the folding thread was halfway through. (The control thread's folds need
 * no such care: the shim's own fork handler waits for the control thread.) */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sthread *threads;
static pthread_t folder;
static int folder_running;
static atomic_int folder_quit;
static pid_t folder_tid; /* its kernel id, for folder_fork_pause */
/* The program took the tick signal: never sample again. 1: said on stderr by the
 * signal guard, the folding thread still has to disarm and note it; 2: all done. */
static atomic_int gave_up;
/* Sampling was set up (pl_sampler_init): a seccomp filter matters from then on. */
static int sampler_ready;
/* Folding thread: events opened again after the program closed them (reopen_lost),
 * and whether the notes say so yet. */
static uint64_t events_reopened;
static int events_noted;
#define CHECK_FOLDS 5 /* folds between two checks of the events' numbers: 50 ms */


/* Engine threads outlive their sampler state (the engine frees them with the
 * profiler), so the pointer stays good once the list's lock is let go. */
struct coprof_thread *pl_sampler_thread_of(pid_t tid)
{
	struct coprof_thread *out = NULL;
	pthread_mutex_lock(&lock);
	for (struct pl_sthread *st = threads; st && !out; st = st->next)
		if (st->tid == tid && !atomic_load(&st->dead))
			out = st->thread;
	pthread_mutex_unlock(&lock);
	return out;
}

/* --- folding ----------------------------------------------------------------------- */

/* Moves one record into the engine. */
static void fold_rec(struct pl_sthread *st, struct pl_rec *rec)
{
	uint32_t depth = pl_stack_user_depth(rec->pcs, rec->depth);
	if (rec->kind == PL_REC_SAMPLE) {
		struct coprof_ctx *ctx = rec->sp ? pl_stack_fold(st, rec, depth) : rec->ctx;
		if (rec->fiber)
			pl_stack_fold_name(rec, depth);
		coprof_sample(st->thread, ctx, rec->pcs, depth, rec->weight, 0);
		return;
	}
	coprof_sample_n(st->thread, rec->ctx, rec->pcs, depth, pl_sconf.period, rec->weight,
			1); /* a wait: its ticks at once */
}

/* A tick that met an asyncio task no scan had listed (rec->new_coro): folded into the
 * task the scan it asked for found there, or, when that scan found none, into the
 * context the tick had (the thread's); 1 when that scan has not ended yet (the tick is
 * to be held), unless `force` (sampling stops, the thread exited): then it is the
 * thread's. */
static int place(struct pl_sthread *st, struct pl_rec *rec, int force)
{
	struct coprof_ctx *ctx;
	int rc = pl_sampler_python_claim(rec->new_coro, rec->new_key, rec->new_gen, &ctx);
	if (rc == -EAGAIN && !force)
		return 1;
	if (rc == 1) {
		rec->ctx = ctx;
		pl_sampler_python_cut(rec, rec->new_frames);
	}
	fold_rec(st, rec);
	return 0;
}

/* Keeps a tick for a later fold: 1, or 0 when there is no room (PL_HELD_MAX). */
static int hold(struct pl_sthread *st, const struct pl_rec *rec)
{
	if (st->nheld == st->held_cap) {
		uint32_t cap = st->held_cap ? st->held_cap * 2 : 64;
		struct pl_rec *more =
		    cap <= PL_HELD_MAX ? realloc(st->held, cap * sizeof(*more)) : NULL;
		if (!more)
			return 0;
		st->held = more;
		st->held_cap = cap;
	}
	memcpy(&st->held[st->nheld++], rec, pl_rec_size(rec));
	return 1;
}

/* Moves the records of one thread's ring into the engine, and the held ones whose
 * scan has ended. Called with `lock` held, so only one thread ever calls
 * coprof_sample. `keep` 0 discards them all (they belong to a profile already
 * cleared); `force` places every held one (place). */
static void drain(struct pl_sthread *st, int keep, int force)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; keep && st->thread && i < st->nheld; i++) {
		if (!place(st, &st->held[i], force))
			continue;
		if (kept != i)
			memcpy(&st->held[kept], &st->held[i], pl_rec_size(&st->held[i]));
		kept++;
	}
	st->nheld = kept;
	uint32_t t = atomic_load_explicit(&st->tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(&st->head, memory_order_acquire);
	for (uint32_t next; t != h; t = next) {
		struct pl_rec *rec = pl_ring_at(st, &t);
		next = t + pl_rec_size(rec);
		if (!keep || !st->thread || !rec->depth)
			continue;
		if (rec->kind == PL_REC_SAMPLE && rec->new_coro && pl_sampler_python_claim) {
			if (place(st, rec, force) && !hold(st, rec))
				place(st, rec, 1);
			continue;
		}
		fold_rec(st, rec);
	}
	atomic_store_explicit(&st->tail, t, memory_order_release);
}

static void report_counts(struct pl_sthread *st)
{
	static const struct {
		const char *what;
		size_t off;
	} counters[] = {
	    {"sample ticks deferred mid-switch", offsetof(struct pl_sthread, deferred)},
	    {"sample ticks dropped (buffer full)", offsetof(struct pl_sthread, dropped)},
	    {"sample stacks truncated", offsetof(struct pl_sthread, truncated)},
	    {"sample stacks not unwound", offsetof(struct pl_sthread, failed)},
	    {"sample ticks dropped (Python frames unreadable)",
	     offsetof(struct pl_sthread, py_failed)},
	};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		_Atomic uint64_t *c = (_Atomic uint64_t *)((char *)st + counters[i].off);
		uint64_t n = atomic_exchange_explicit(c, 0, memory_order_relaxed);
		if (n && pl_prof)
			coprof_count_dropped(pl_prof, counters[i].what, n);
	}
}

/* Folds every thread, and frees the threads that exited once their ring is empty.
 * `keep` 0 discards the records (they belong to a profile already cleared); `force`
 * (sampling stops) places every held tick (drain). */
static void fold_all(int keep, int force)
{
	pthread_mutex_lock(&lock);
	for (struct pl_sthread **pp = &threads; *pp;) {
		struct pl_sthread *st = *pp;
		int dead = atomic_load_explicit(&st->dead, memory_order_acquire);
		drain(st, keep, force || dead);
		if (keep && pl_sconf.wall)
			pl_sampler_charge_waits(st);
		report_counts(st);
		if (dead) {
			*pp = st->next;
			pl_stack_fold_free(st);
			free(st->held);
			free(st->waits);
			free(st);
			continue;
		}
		pp = &st->next;
	}
	pthread_mutex_unlock(&lock);
}

/* Sampling stops: no tick counts from now on, and no timer fires again. */
static void disarm_all(void)
{
	atomic_store(&pl_sampler_on, 0);
	pthread_mutex_lock(&lock);
	for (struct pl_sthread *st = threads; st; st = st->next)
		if (!atomic_load(&st->dead))
			pl_sampler_arm(st, 0);
	pthread_mutex_unlock(&lock);
}

/* The program installed its own handler on the tick signal: it must not get our ticks,
 * so sampling stops for good, and says why. */
static void give_up_signal(void)
{
	atomic_store(&gave_up, 2);
	disarm_all();
	pl_say("sample mode: the program took signal %d for itself; sampling stopped",
	       pl_sconf.signo);
	if (pl_prof)
		coprof_set_note(pl_prof, "sampling stopped: the program took the tick signal");
}

/* Called by the signal guard (signal-guard.c) when the program installs a handler of its
 * own for the tick signal, maybe in a signal handler (async-signal-safe but for the
 * trylock, which never waits), before that handler goes in: no tick counts from now
 * on, every timer is disarmed if the list is free (else by the folding thread at its
 * next fold; a tick that fires meanwhile disarms its own thread's timer). */
static void tick_lost(int signo)
{
	(void)signo;
	atomic_store(&pl_sampler_on, 0);
	if (atomic_exchange(&gave_up, 1) != 0)
		return;
	if (pthread_mutex_trylock(&lock) == 0) {
		for (struct pl_sthread *st = threads; st; st = st->next)
			if (!atomic_load(&st->dead))
				pl_sampler_arm(st, 0);
		pthread_mutex_unlock(&lock);
	}
	static const char line[] = "coprof: sample mode: the program installed its own handler "
				   "for the tick signal; sampling stopped\n";
	ssize_t w = write(2, line, sizeof(line) - 1);
	(void)w;
}

/* The folding thread takes no signal at all (start_folder blocks them all). */
static void *fold_loop(void *arg)
{
	(void)arg;
	folder_tid = (pid_t)syscall(SYS_gettid);
	/* named as the shim's threads are: `coprof attach` gives them no entry */
	prctl(PR_SET_NAME, "coprof-fold", 0, 0, 0);
	unsigned folds = 0;
	while (!atomic_load_explicit(&folder_quit, memory_order_relaxed)) {
		struct timespec ts = {0, FOLD_NS};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&fork_lock);
		int expect = 1;
		if (atomic_compare_exchange_strong(&gave_up, &expect, 2)) {
			disarm_all();
			if (pl_prof)
				coprof_set_note(
				    pl_prof, "sampling stopped: the program took the tick signal");
		}
		int on = atomic_load_explicit(&pl_sampler_on, memory_order_relaxed);
		if (on && ++folds % CHECK_FOLDS == 0 && !atomic_load(&pl_sampler_sandboxed)) {
			pthread_mutex_lock(&lock);
			reopen_lost();
			pthread_mutex_unlock(&lock);
		}
		if (on) {
			fold_all(1, 0);
			if (pl_sampler_python_fold)
				pl_sampler_python_fold();
			if (!pl_sampler_handler_is_ours())
				give_up_signal();
		}
		pthread_mutex_unlock(&fork_lock);
		/* Outside the fork lock: this may wait for Python's GIL, which a thread
		 * that forks (and takes the fork lock first) may hold. */
		if (on && pl_sampler_python_after_fold)
			pl_sampler_python_after_fold();
	}
	return NULL;
}

/* The folding thread is made with the real pthread_create, so the shim's hook neither
 * registers it with the engine nor gives it timers: it never shows in a profile. */
static void start_folder(void)
{
	typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	create_fn create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
	if (!create)
		create = pthread_create;
	atomic_store(&folder_quit, 0);
	sigset_t old;
	pl_sig_block_all(&old); /* inherited by the thread: the program's signals are not ours */
	folder_running = create(&folder, NULL, fold_loop, NULL) == 0;
	pl_sig_restore(&old);
	if (!folder_running)
		pl_say("sample mode: cannot start the folding thread");
}

/* Around a Python os.fork (control.c, pl_control_fork_pause): the folding thread stops,
 * so Python does not count it, and starts again after the fork; ticks wait in the rings
 * meanwhile. Returns the stopped thread's kernel id, 0 if none ran. */
static pid_t folder_fork_pause(void)
{
	if (!folder_running)
		return 0;
	atomic_store(&folder_quit, 1);
	pthread_join(folder, NULL);
	folder_running = 0;
	return folder_tid;
}

static void folder_fork_resume(void)
{
	if (!folder_running)
		start_folder();
}

/* --- seccomp ----------------------------------------------------------------------- */


/* A filter may kill the process for any system call the program did not expect of
 * itself (SECCOMP_RET_KILL_*), and coprof cannot read which: from now on the handler
 * neither restarts the event's period (ioctl) nor reads the thread's CPU clock (a tick
 * weighs its period), no new thread opens an event or a timer, and the events already
 * open are never checked, disarmed nor opened again (ioctl, perf_event_open). */
static void sandbox(const char *how)
{
	if (!sampler_ready || atomic_exchange(&pl_sampler_sandboxed, 1))
		return;
	coprof_clock_no_perf(pl_cfg.clock);
	char note[320];
	snprintf(note, sizeof(note),
		 "sample mode: %s; threads started from then on are not sampled, and ticks "
		 "are not dithered: each weighs one period",
		 how);
	pl_say("%s", note);
	coprof_set_note(pl_prof, note);
}

/* --- threads ----------------------------------------------------------------------- */

static int make_timer(clockid_t clk, int id, timer_t *out)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = pl_sconf.signo;
	sev.sigev_value.sival_int = id;
#ifdef sigev_notify_thread_id
	sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
#else
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#endif
	return timer_create(clk, &sev, out) < 0 ? -errno : 0;
}

/* Our fds go at or above this number, out of the way of a host that counts on getting
 * the lowest free one (and of select's FD_SETSIZE): 1024, or half the fd limit when
 * that is lower. Set by pl_sampler_init. */
static int fd_floor = 1024;

/* Moves `fd` to a high number, close-on-exec; returns the new fd, or `fd` itself when
 * no higher one is free. */
static int move_high(int fd)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, fd_floor);
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

/* Closes an event's number, only while it still names the event (a number the program
 * closed and reused stays the program's), and forgets it. Under a seccomp filter the
 * check is fstat alone: the id's ioctl may be forbidden. */
static void close_event(volatile sig_atomic_t *fd, const struct pl_event_id *id)
{
	int n = *fd;
	*fd = -1;
	if (pl_event_ours(n, id, !atomic_load(&pl_sampler_sandboxed)))
		close(n);
}

/* Opens a perf event on thread `tid` (0: the calling thread) that, each `period` of
 * it, queues a SIGTRAP carrying `cookie`, which the kernel delivers as the thread next
 * returns to user space. As the signal is only raised on the way out, it never cuts a
 * syscall short (a tick signalled from inside one, as a fasync signal or a CPU-time
 * timer would be, makes a sleep fail with EINTR). Disabled until pl_sampler_arm.
 * Returns the fd, whose identity goes to `id`, or -errno. */
static int open_event(pid_t tid, uint64_t config, uint64_t period, uint64_t cookie, int user_only,
		      struct pl_event_id *id)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = config;
	a.sample_period = period;
	a.disabled = 1;
	a.exclude_kernel = (unsigned)user_only;
	a.exclude_hv = 1;
	a.sigtrap = 1;
	a.remove_on_exec = 1; /* sigtrap requires it; exec drops our handler anyway */
	a.sig_data = cookie;
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	fd = move_high(fd);
	struct stat sb;
	if (fstat(fd, &sb) != 0 || ioctl(fd, PERF_EVENT_IOC_ID, &id->id) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	id->dev = sb.st_dev;
	id->ino = sb.st_ino;
	return fd;
}

/* The thread's task-clock event: a tick each period of its CPU time (in the kernel too,
 * unless user_only), so never in a blocked thread, and time in a syscall is charged to
 * the syscall's caller. */
static int open_task_clock(pid_t tid, int user_only, struct pl_event_id *id)
{
	return open_event(tid, PERF_COUNT_SW_TASK_CLOCK, pl_sconf.period, PL_PERF_COOKIE, user_only,
			  id);
}

/* Under wall, the thread's context-switch event: a tick as it resumes after each switch,
 * where it waited. (Switches happen in the kernel: useless with exclude_kernel.) */
static int open_wake_event(pid_t tid, struct pl_event_id *id)
{
	return open_event(tid, PERF_COUNT_SW_CONTEXT_SWITCHES, 1, PL_PERF_COOKIE + 1, 0, id);
}

/* The calling thread's own stack, which samples off it may be a coroutine's. */
static void own_stack(struct pl_sthread *st)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &addr, &size) == 0) {
		st->own_lo = (uintptr_t)addr;
		st->own_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&a);
}

/* Sets up the calling thread: its state, its tick source (armed when sampling runs),
 * and libunwind's per-thread caches, filled here by one walk outside any signal. Under
 * cpu a thread whose perf event cannot be opened (out of fds) ticks on its CPU-time
 * timer instead (at the kernel's tick rate at most); under wall it is not sampled. */
static void thread_start(void)
{
	if (atomic_load(&pl_sampler_sandboxed))
		return;
	pl_tick_stack_start();
	if (pl_sampler_tls)
		return;
	struct pl_sthread *st = calloc(1, sizeof(*st));
	if (!st)
		return;
	st->tid = (pid_t)syscall(SYS_gettid);
	st->tls = pl_tls();
	st->thread = pl_thread();
	st->perf_fd = st->wake_fd = -1;
	own_stack(st);
	st->rng = ((uint64_t)(uintptr_t)st << 16) ^ (uint64_t)st->tid ^ 0x9e3779b97f4a7c15ull;
	/* Under wall, suspended coroutines' stacks: allocated here, as a switch may come
	 * in a signal handler (mmap'ed by malloc: pages are touched only when used). */
	if (pl_sconf.wall)
		st->waits = calloc(PL_WAIT_SLOTS, sizeof(*st->waits));
	uintptr_t warm[PL_SAMPLE_DEPTH];
	pl_unw_backtrace(st->tls, NULL, warm, PL_SAMPLE_DEPTH);
	if (pl_sconf.perf) {
		st->perf_fd = open_task_clock(0, pl_sconf.perf_user, &st->perf_id);
		if (pl_sconf.wall && st->perf_fd >= 0 &&
		    (st->wake_fd = open_wake_event(0, &st->wake_id)) < 0) {
			close(st->perf_fd);
			st->perf_fd = st->wake_fd = -1;
		}
		if (st->perf_fd < 0)
			st->perf_fd = -1;
	}
	if (st->perf_fd < 0 && pl_sconf.wall && !pl_sconf.perf)
		st->has_mono = make_timer(CLOCK_MONOTONIC, PL_TIMER_MONO, &st->mono) == 0;
	else if (st->perf_fd < 0)
		st->has_cpu = make_timer(CLOCK_THREAD_CPUTIME_ID, PL_TIMER_CPU, &st->cpu) == 0;
	if (!st->has_mono && !st->has_cpu && st->perf_fd < 0) {
		free(st->waits);
		free(st);
		return;
	}
	pthread_mutex_lock(&lock);
	st->next = threads;
	threads = st;
	pthread_mutex_unlock(&lock);
	pl_sampler_tls = st;
	if (atomic_load(&pl_sampler_on))
		pl_sampler_arm(st, 1);
}

/* Closes the thread's tick source, so no tick may find it gone. */
static void close_source(struct pl_sthread *st)
{
	if (st->has_mono)
		timer_delete(st->mono);
	if (st->has_cpu)
		timer_delete(st->cpu);
	close_event(&st->perf_fd, &st->perf_id);
	close_event(&st->wake_fd, &st->wake_id);
	st->has_mono = st->has_cpu = 0;
}

/* The thread is exiting: its tick source goes now (no tick may find it gone); its state is
 * freed by the folding thread once its last records are folded. Under the list's lock,
 * so the folding thread never opens an event again for a thread that has gone. */
static void thread_exit(void)
{
	pl_tick_stack_exit();
	struct pl_sthread *st = pl_sampler_tls;
	if (!st)
		return;
	pl_sampler_tls = NULL;
	pthread_mutex_lock(&lock);
	close_source(st);
	atomic_store_explicit(&st->dead, 1, memory_order_release);
	pthread_mutex_unlock(&lock);
}

/* Reads /proc/thread-self/status once per thread: about 20 us, against some 50 for a
 * thread's creation and set-up. Catches a filter installed with no libc function of
 * the ones seccomp.c sees (the bare syscall instruction); the thread is filtered if its
 * creator was. */
static void thread_early(void)
{
	if (sampler_ready && !atomic_load(&pl_sampler_sandboxed) && pl_seccomp_filtered())
		sandbox("a thread started under a seccomp filter");
}

/* Folding thread, list lock held. The program closed the number of some thread's event
 * (a daemon's close-all loop, close_range): the kernel freed the event with it, and the
 * thread ticks no more. Opens it again for that thread (perf_event_open takes a tid),
 * armed as sampling is; or, when that fails, the thread is sampled no more. Either way
 * the file's notes say so, once, and how many events were lost. Never under a seccomp
 * filter (ioctl and perf_event_open may be forbidden). */
static void reopen_lost(void)
{
	for (struct pl_sthread *st = threads; st; st = st->next) {
		if (atomic_load(&st->dead) || st->perf_fd < 0)
			continue;
		int ok = pl_event_ours(st->perf_fd, &st->perf_id, 1);
		int wake_ok = st->wake_fd < 0 || pl_event_ours(st->wake_fd, &st->wake_id, 1);
		if (ok && wake_ok)
			continue;
		if (pl_prof)
			coprof_count_dropped(pl_prof, "sample perf events closed by the program",
					     (uint64_t)(!ok + !wake_ok));
		/* Both go, and both come again: the handler reads the id after the number. */
		close_event(&st->perf_fd, &st->perf_id);
		close_event(&st->wake_fd, &st->wake_id);
		struct pl_event_id perf_id, wake_id;
		int fd = open_task_clock(st->tid, pl_sconf.perf_user, &perf_id), wake = -1;
		if (fd >= 0 && pl_sconf.wall && (wake = open_wake_event(st->tid, &wake_id)) < 0) {
			close(fd);
			fd = wake;
		}
		if (fd < 0) {
			char note[256];
			snprintf(note, sizeof(note),
				 "sample mode: the program closed coprof's perf event of thread "
				 "%d, which could not be opened again (%s): that thread was not "
				 "sampled from then on",
				 (int)st->tid, strerror(-fd));
			pl_say("%s", note);
			if (pl_prof)
				coprof_set_note(pl_prof, note);
			continue;
		}
		st->perf_id = perf_id;
		if (wake >= 0)
			st->wake_id = wake_id;
		atomic_thread_fence(memory_order_release);
		st->wake_fd = wake;
		st->perf_fd = fd;
		if (atomic_load(&pl_sampler_on))
			pl_sampler_arm(st, 1);
		events_reopened++;
	}
	if (events_reopened && !events_noted && pl_prof) {
		events_noted = 1;
		coprof_set_note(pl_prof, "sample mode: the program closed coprof's perf event "
					 "descriptors (a close-all loop); they were opened again "
					 "within 50 ms, the ticks in between are lost");
	}
}

/* A coroutine moved to another thread (the ucontext adapter): whichever thread had it
 * waiting as `ctx` stops charging it. The list's lock is only tried, a while: this may
 * run in a signal handler, maybe one that interrupted a holder. */
void pl_sampler_moved(struct coprof_ctx *ctx)
{
	if (!ctx || !pl_sconf.wall)
		return;
	int tries = 0;
	while (pthread_mutex_trylock(&lock) != 0)
		if (++tries > 1000)
			return;
		else
			sched_yield();
	for (struct pl_sthread *st = threads; st; st = st->next)
		if (st != pl_sampler_tls && !atomic_load(&st->dead))
			pl_sampler_drop_wait(st, ctx);
	pthread_mutex_unlock(&lock);
}

/* --- the runtime --------------------------------------------------------------------- */

static int sampler_start(void)
{
	if (atomic_load(&gave_up))
		return -EBUSY;
	fold_all(0, 0); /* records from before belong to no profile */
	atomic_fetch_add(&pl_sampler_epoch, 1);
	atomic_store(&pl_sampler_on, 1);
	pthread_mutex_lock(&lock);
	for (struct pl_sthread *st = threads; st; st = st->next) {
		atomic_store(&st->rebase, 1);
		atomic_store(&st->ticks, 0);
		/* Contexts are made anew after a start: until its next switch the thread
		 * is counted in its own context rather than under a stale one. */
		atomic_store(&st->cur, NULL);
		if (!atomic_load(&st->dead))
			pl_sampler_arm(st, 1);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

static int sampler_stop(void)
{
	disarm_all();
	fold_all(1, 1);
	return 0;
}

/* In the child only the forking thread survives, and no timer does: the others' state
 * is dropped, this thread gets new timers and a new folding thread.
 *
 * Before the fork no walk may be under way in another thread (the fork gate, unwind.c).
 * Prepare handlers run in the reverse order of registration: this one, registered
 * after the shim's own (lifecycle/fork.c), runs before them, so the gate is shut
 * before the forking thread takes any other lock of the shim's, and its own ticks from
 * then on keep the pc alone. It shuts under the fork lock, and opens again before the
 * lock is let go: two threads that fork at once shut and drain it one after the other,
 * never one while the other reopens it. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&fork_lock);
	pl_unw_fork_shut();
}

static void fork_parent(void)
{
	pl_unw_fork_parent();
	pthread_mutex_unlock(&fork_lock);
}

static void sampler_after_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_mutex_init(&fork_lock, NULL);
	/* Before this thread's first walk (thread_start's). */
	if (pl_unw_fork_child() < 0 && pl_prof)
		coprof_set_note(pl_prof, "sample mode: this process was forked while another "
					 "thread's stack walk held libunwind's locks; its "
					 "samples keep the interrupted function alone");
	/* The shim starts the child's profiler again if the parent's was running. */
	atomic_store(&pl_sampler_on, 0);
	/* Every state goes, this thread's too: their perf events watch the parent's
	 * threads (the descriptors were inherited and are closed here). */
	struct pl_sthread *st = threads;
	while (st) {
		struct pl_sthread *next = st->next;
		close_event(&st->perf_fd, &st->perf_id);
		close_event(&st->wake_fd, &st->wake_id);
		pl_stack_fold_free(st);
		free(st->held);
		free(st->waits);
		free(st);
		st = next;
	}
	threads = NULL;
	pl_sampler_tls = NULL;
	thread_start();
	start_folder();
}

static const struct pl_runtime sampler_runtime = {
    .name = "sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .thread_start = thread_start,
    .thread_exit = thread_exit,
    .after_fork_child = sampler_after_fork_child,
    .fork_pause = folder_fork_pause,
    .fork_resume = folder_fork_resume,
    .thread_early = thread_early,
    .sandbox = sandbox,
    .altstack_owns = pl_tick_stack_owns,
    .altstack_program_set = pl_tick_stack_program_set,
};

/* A real-time signal nobody handles, other than the toggle signal. */
static int pick_signal(void)
{
	for (int s = SIGRTMIN + 4; s <= SIGRTMAX - 2; s++) {
		struct sigaction old;
		if (s == pl_cfg.signo || sigaction(s, NULL, &old) < 0)
			continue;
		if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
			return s;
	}
	return -1;
}

/* The kernel's tick rate (CONFIG_HZ): the coarse clocks advance once a tick. */
static unsigned kernel_hz(void)
{
	struct timespec res;
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) < 0 || res.tv_sec || res.tv_nsec <= 0)
		return 0;
	return (unsigned)(1000000000 / res.tv_nsec);
}

/* Where ticks come from: perf events where this process may open them. Under cpu they
 * watch the kernel too when allowed (else, at perf_event_paranoid 2 without
 * CAP_PERFMON, user time only); under wall the context-switch event must open as well,
 * and it needs the kernel. Otherwise, under cpu, the CPU-time timer, which the kernel
 * checks at its own tick, so the rate is capped there. Under wall there is no harmless
 * fallback (a CLOCK_MONOTONIC timer signals blocked threads, and their sleeps end with
 * EINTR): -EPERM, nothing is sampled, but for the tests' forced timer. Says so once. */
static int choose_source(unsigned *hz)
{
	char why[160];
	int fd = -ENOSYS;
	if (pl_sampler_force_timer) {
		snprintf(why, sizeof(why), "turned off");
		goto timer;
	}
	struct pl_event_id id;
	fd = open_task_clock(0, 0, &id);
	if ((fd == -EACCES || fd == -EPERM) && !pl_sconf.wall) {
		fd = open_task_clock(0, 1, &id);
		pl_sconf.perf_user = fd >= 0;
	}
	if (fd >= 0 && pl_sconf.wall) {
		int wake = open_wake_event(0, &id);
		if (wake < 0) {
			close(fd);
			fd = wake;
		} else {
			close(wake);
		}
	}
	if (fd >= 0) {
		close(fd);
		struct sigaction old;
		if (sigaction(SIGTRAP, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL) {
			pl_sconf.perf = 1;
			pl_sconf.signo = SIGTRAP;
			if (pl_sconf.perf_user)
				coprof_set_note(pl_prof, "sample mode: perf events may not watch "
							 "the kernel here, so time in syscalls "
							 "is charged to the next user-space tick");
			return 0;
		}
		snprintf(why, sizeof(why), "SIGTRAP is taken");
	} else {
		snprintf(why, sizeof(why), "%s", strerror(-fd));
	}
timer:;
	char note[384];
	if (pl_sconf.wall && !pl_sampler_force_timer) {
		pl_say("sample mode: -c wall needs perf events, and they are not available here "
		       "(%s); a timer would cut the program's sleeps short, so nothing is sampled "
		       "(-c cpu works)",
		       why);
		return -EPERM;
	} else if (pl_sconf.wall) {
		snprintf(note, sizeof(note),
			 "sample mode: no perf events (%s); wall ticks from a CLOCK_MONOTONIC "
			 "timer, which cuts sleeps and other blocking calls short (EINTR)",
			 why);
	} else {
		pl_sconf.cpu_timer = 1;
		unsigned khz = kernel_hz();
		if (khz && *hz > khz) {
			*hz = khz;
			pl_sconf.period = 1000000000u / khz;
		}
		snprintf(
		    note, sizeof(note),
		    "sample mode: no perf events (%s); ticks from the CPU-time timer, at %u Hz",
		    why, *hz);
	}
	pl_say("%s", note);
	coprof_set_note(pl_prof, note);
	return 0;
}

/* The code of libc's function `name` (the next definition after ours), or an empty
 * range when its symbol has no size. */
static void libc_code(const char *name, uintptr_t *lo, uintptr_t *hi)
{
	*lo = *hi = 0;
	void *at = dlsym(RTLD_NEXT, name);
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (!at || !dladdr1(at, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size)
		return;
	*lo = (uintptr_t)at;
	*hi = (uintptr_t)at + sym->st_size;
}

static int sampler_init(int own_thread);

int pl_sampler_init(void)
{
	return sampler_init(1);
}

int pl_sampler_init_attached(void)
{
	return sampler_init(0);
}

int pl_sampler_thread_here(void)
{
	if (sampler_ready)
		thread_start();
	return pl_sampler_tls && atomic_load(&pl_sampler_on) ? 0 : -1;
}

static int sampler_init(int own_thread)
{
	if (pl_cfg.mode != COPROF_MODE_SAMPLE || !pl_prof)
		return 0;
	/* (at most PL_HZ_MAX: config.c refuses more) */
	unsigned hz = pl_cfg.hz ? pl_cfg.hz : PL_DEFAULT_HZ;
	pl_sconf.wall = pl_cfg.clock == COPROF_CLOCK_WALL;
	pl_sconf.period = 1000000000u / hz;
	if (pl_seccomp_filtered()) {
		static const char why[] = "sample mode: the process runs under a seccomp filter, "
					  "which may kill it for the system calls sampling "
					  "makes; not sampling";
		pl_say("%s", why);
		coprof_set_note(pl_prof, why);
		return -EPERM;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2048)
		fd_floor = (int)(rl.rlim_cur / 2);
	pl_sconf.signo = 0;
	pl_sconf.perf = pl_sconf.perf_user = pl_sconf.cpu_timer = 0;
	if (choose_source(&hz) < 0)
		return -EPERM;
	if (!pl_sconf.perf)
		pl_sconf.signo = pick_signal();
	if (pl_sconf.signo < 0) {
		pl_say("sample mode: no free real-time signal; not sampling");
		return -EBUSY;
	}
	struct pl_text_range r = {.at = (uintptr_t)&pl_sampler_init};
	pl_text_range(&r);
	pl_sconf.self_lo = r.lo, pl_sconf.self_hi = r.hi;
	void *asan = dlsym(RTLD_DEFAULT, "__asan_init");
	if (asan) {
		r = (struct pl_text_range){.at = (uintptr_t)asan};
		pl_text_range(&r);
		pl_sconf.asan_lo = r.lo, pl_sconf.asan_hi = r.hi;
	}
	if (!pl_sconf.wall)
		pl_sconf.switch_pc = (uintptr_t)dlsym(RTLD_NEXT, "swapcontext");
	libc_code("swapcontext", &pl_sconf.libc_switch_lo[0], &pl_sconf.libc_switch_hi[0]);
	libc_code("setcontext", &pl_sconf.libc_switch_lo[1], &pl_sconf.libc_switch_hi[1]);
	int err = pl_sampler_install_handler();
	if (err < 0) {
		pl_say("sample mode: cannot install the tick handler: %s", strerror(-err));
		return err;
	}
	/* The program's resets and masks leave the tick alone from now on. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	pl_sig_guard(pl_sconf.signo, &dfl, 1, tick_lost);
	/* A CPython without an adapter (a version coprof does not support) keeps its
	 * native stacks; with one, the tick handler reads its Python frames. */
	if (pl_sampler_python)
		pl_sampler_python_init();
	else if (dlsym(RTLD_DEFAULT, "Py_IsInitialized"))
		pl_say("sample mode: no Python adapter for this interpreter; sampling its "
		       "native stacks");
	pl_unw_load();
	pl_runtime_add(&sampler_runtime);
	sampler_ready = 1;
	pthread_atfork(fork_prepare, fork_parent, NULL);
	if (own_thread)
		thread_start(); /* the thread running the constructor */
	start_folder();
	return 0;
}
