/* unwind.c: the sampler's stack walks, with libunwind loaded privately.
 *
 * libunwind.so also defines the _Unwind_* functions that C++ exceptions and thread
 * cancellation call. Linked into the shim (a DT_NEEDED of an LD_PRELOAD library), it
 * would come before libgcc_s in the global scope, so C++ code the program loads later
 * (a Python extension, a plugin) would throw through libunwind instead: 12 times slower
 * here, and under sampling a tick could land while that libunwind held its lock, walk
 * with the same libunwind, and wait for the lock forever. dlopen with RTLD_LOCAL keeps
 * those symbols out of the program's lookups; only the sampler calls unw_backtrace.
 *
 * A program that loads libunwind.so itself shares this copy (one soname, one object).
 * libunwind blocks every signal around its lock; the signal guard passes the masks its
 * code asks for (pl_sig_raw_masks_from), so no tick lands while the lock is held,
 * whoever it is working for. Where an interposer stands between libunwind and the
 * guard (AddressSanitizer's sigprocmask), the guard cannot tell libunwind's masks:
 * the tick handler then looks for libunwind on the interrupted stack itself
 * (busy) and keeps the pc alone of a tick that lands in it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"

/* libunwind's ABI has kept this soname since 1.0. */
#define UNWIND_SONAME "libunwind.so.8"

static int (*backtrace_fn)(void **pcs, int max);
/* libunwind's text, while the signal guard may not see its masks (busy) */
static uintptr_t unw_lo, unw_hi;

#define BUSY_SCAN 32 /* stack words above sp looked at for a return into libunwind */
#define PAGE 4096u

/* Nonzero when the sigprocmask libunwind calls is the shim's (no interposer of another
 * library, such as AddressSanitizer's, stands first in the global scope). */
static int masks_reach_guard(void)
{
	Dl_info first, shim;
	void *fn = dlsym(RTLD_DEFAULT, "sigprocmask");
	return fn && dladdr(fn, &first) && dladdr((void *)&pl_unw_load, &shim) &&
	       first.dli_fbase == shim.dli_fbase;
}

/* The frame-by-frame walk, for pl_unw_walk. libunwind's x86-64 ABI as its header
 * declares it (the header is not needed to build): a cursor is 127 words, a context is
 * the signal's ucontext_t, UNW_REG_IP and UNW_REG_SP are registers 16 and 7, and
 * UNW_INIT_SIGNAL_FRAME (libunwind 1.3) says the context is a signal's. */
#define UNW_CURSOR_WORDS 127
#define UNW_REG_IP_X86_64 16
#define UNW_REG_SP_X86_64 7
#define UNW_INIT_SIGNAL_FRAME_FLAG 1
static int (*init2_fn)(void *cursor, void *uc, int flag);
static int (*step_fn)(void *cursor);
static int (*get_reg_fn)(void *cursor, int reg, uintptr_t *val);
/* unw_get_proc_info (no_unwind_info). Its unw_proc_info_t is 10 words on x86-64;
 * PROC_INFO_WORDS leaves room. */
#define PROC_INFO_WORDS 32
static int (*proc_info_fn)(void *cursor, void *info);

int pl_unw_load(void)
{
	if (backtrace_fn)
		return 0;
	void *lib = dlopen(UNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	void *fn = lib ? dlsym(lib, "unw_backtrace") : NULL;
	if (!fn) {
		pl_say("sample mode: %s; samples keep the interrupted function alone", dlerror());
		return -1;
	}
	struct pl_text_range r = {.at = (uintptr_t)fn};
	if (pl_text_range(&r))
		pl_sig_raw_masks_from(r.lo, r.hi);
	if (!masks_reach_guard())
		unw_lo = r.lo, unw_hi = r.hi;
	backtrace_fn = (int (*)(void **, int))fn;
#if defined(__x86_64__)
	init2_fn = (int (*)(void *, void *, int))dlsym(lib, "_ULx86_64_init_local2");
	step_fn = (int (*)(void *))dlsym(lib, "_ULx86_64_step");
	get_reg_fn = (int (*)(void *, int, uintptr_t *))dlsym(lib, "_ULx86_64_get_reg");
	proc_info_fn = (int (*)(void *, void *))dlsym(lib, "_ULx86_64_get_proc_info");
#endif
	return 0;
}

/* The fork gate. A walk holds libunwind's locks and the loader's (dl_iterate_phdr) as
 * it goes; a fork amid it gives the child those locks held by a thread the child does
 * not have, and the child's first walk would wait for them forever. So every walk
 * passes the gate: `gate` counts the walks under way, GATE_SHUT set turns new ones
 * away (they keep the pc alone, as when no walk may run). The sampler's fork handler
 * shuts it and waits for the count to drain before the fork.
 * GATE_BANNED: a walk was under way when this process was forked (or its parent's
 * was): its copy of those locks may be held for good, so no walk runs here ever, nor
 * in its children. One word, so that a walk's entry and the fork's shutting can never
 * both miss the other. Async-signal-safe: atomics only. */
#define GATE_SHUT (1u << 30)
#define GATE_BANNED (1u << 29)
#define GATE_WALKS (GATE_BANNED - 1)
static atomic_uint gate;
static int gate_drained; /* the last pl_unw_fork_shut saw no walk left */
#define GATE_WAIT_NS 1000000000L /* the longest a fork waits for walks under way: 1 s */
#define GATE_SPINS 100		     /* yields before the wait sleeps between looks */

/* Starts a walk for the shim: -1 when none may run (the fork gate is shut, or its
 * pipe's numbers are the program's now); else counts it in the gate and marks the
 * thread as walking (its masks pass the guard, its pipe is noted by fd.c), what
 * end_walk undoes. */
static int begin_walk(struct pl_tls *tls, sig_atomic_t *saved)
{
	if (atomic_fetch_add(&gate, 1) & (GATE_SHUT | GATE_BANNED)) {
		atomic_fetch_sub(&gate, 1);
		return -1;
	}
	if (!pl_fd_unw_pipe_safe()) {
		atomic_fetch_sub(&gate, 1);
		return -1;
	}
	*saved = tls ? tls->raw_masks : 0;
	if (tls)
		tls->raw_masks = 1;
	return 0;
}

static void end_walk(struct pl_tls *tls, sig_atomic_t saved)
{
	if (tls)
		tls->raw_masks = saved;
	atomic_fetch_sub_explicit(&gate, 1, memory_order_release);
}

static long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Async-signal-safe (fork may be called in a handler): shuts the gate, then waits up
 * to GATE_WAIT_NS for the walks under way to end: a few yields (a walk takes tens of
 * microseconds), then 50-us sleeps. It gives up on a walk stuck or preempted that
 * long, or on the forking thread's own, interrupted by a handler that forks. */
int pl_unw_fork_shut(void)
{
	gate_drained = 0;
	if (atomic_fetch_or(&gate, GATE_SHUT) & GATE_BANNED)
		return 0;
	long deadline = 0;
	for (unsigned i = 0; atomic_load(&gate) & GATE_WALKS; i++) {
		if (i < GATE_SPINS) {
			sched_yield();
			continue;
		}
		long now = mono_ns();
		if (!deadline)
			deadline = now + GATE_WAIT_NS;
		else if (now >= deadline)
			return 0;
		struct timespec nap = {0, 50000};
		nanosleep(&nap, NULL);
	}
	gate_drained = 1;
	return 1;
}

/* After the fork, in the parent: walks run again (the ones under way were the
 * parent's own threads', which go on). */
void pl_unw_fork_parent(void)
{
	atomic_fetch_and(&gate, ~GATE_SHUT);
}

int pl_unw_fork_child(void)
{
	if (!gate_drained || (atomic_load(&gate) & GATE_BANNED)) {
		/* The walks counted were the parent's threads': none of them is here. */
		atomic_store(&gate, GATE_SHUT | GATE_BANNED);
		return -1;
	}
	atomic_store(&gate, 0);
	return 0;
}

static int busy(const ucontext_t *uc);

int pl_unw_backtrace(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max)
{
	sig_atomic_t saved;
	if (!backtrace_fn || (uc && busy(uc)) || begin_walk(tls, &saved) < 0)
		return -1;
	int n = backtrace_fn((void **)pcs, max);
	end_walk(tls, saved);
	return n;
}

/* async-signal-safe: nonzero when one byte at `at` can be read (a failed read is an
 * error return, not a fault). */
static int readable(uintptr_t at)
{
	char byte;
	struct iovec mine = {&byte, 1}, there = {(void *)at, 1};
	return syscall(SYS_process_vm_readv, getpid(), &mine, 1ul, &there, 1ul, 0ul) == 1;
}

/* async-signal-safe: nonzero when the code a signal interrupted (uc) may be inside
 * libunwind while the guard may not see its masks: its pc in libunwind's text, or a
 * return into it among the innermost stack words. Walking then could wait forever for
 * a lock the interrupted code holds. The words above sp are the interrupted code's live
 * frames (not ASan-instrumented:
 * its redzones lie among them). sp's page is mapped; the next one is read only once a
 * probe of it succeeds (a coroutine's stack may end right above its first frame). */
__attribute__((no_sanitize("address"))) static int busy(const ucontext_t *uc)
{
	uintptr_t lo = unw_lo, hi = unw_hi;
	if (!hi)
		return 0;
	if ((uintptr_t)uc->uc_mcontext.gregs[REG_RIP] - lo < hi - lo)
		return 1;
	const uintptr_t *w =
	    (const uintptr_t *)((uintptr_t)uc->uc_mcontext.gregs[REG_RSP] & ~(uintptr_t)7);
	for (unsigned i = 0; w && i < BUSY_SCAN; i++) {
		uintptr_t at = (uintptr_t)&w[i];
		if (i && at % PAGE == 0 && !readable(at))
			return 0;
		if (w[i] - lo < hi - lo)
			return 1;
	}
	return 0;
}

/* Whether the cursor's frame lies in code no unwind information covers. x86-64's
 * libunwind makes up a procedure one byte long at such a pc (start_ip, end_ip: the
 * first two words of unw_proc_info_t) rather than fail. */
static int no_unwind_info(void *cursor, uintptr_t pc)
{
	uint64_t info[PROC_INFO_WORDS];
	return proc_info_fn && (proc_info_fn(cursor, info) < 0 || (info[0] == pc && info[1] == pc + 1));
}

int pl_unw_walk(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max, uintptr_t *base)
{
	*base = 0;
	sig_atomic_t saved;
	if (!init2_fn || !step_fn || !get_reg_fn || busy(uc) || begin_walk(tls, &saved) < 0)
		return -1;
	uint64_t cursor[UNW_CURSOR_WORDS];
	int n = 0, rc = -1;
	uintptr_t ip, sp, last = 0;
	if (init2_fn(cursor, (void *)uc, UNW_INIT_SIGNAL_FRAME_FLAG) == 0) {
		do {
			if (get_reg_fn(cursor, UNW_REG_IP_X86_64, &ip) < 0 ||
			    get_reg_fn(cursor, UNW_REG_SP_X86_64, &sp) < 0) {
				rc = -1;
				break;
			}
			if (!ip && n) {
				rc = 0; /* a return address of 0: the stack's start */
				break;
			}
			pcs[n++] = ip;
			last = sp;
			/* Code no unwind information covers: libunwind would go on by the frame
			 * pointer, which may lead into another stack's frames (once: past a
			 * hand-written switch's start routine, a cycle rt_parse, 0x0, rt_parse
			 * that no root reached). The interrupted frame there (a runtime's switch
			 * in assembly, State Threads' register restore, halfway between two
			 * stacks) is kept alone, with no end: the fold charges it by its stack
			 * pointer. A caller there (a coroutine's start routine) is the stack's
			 * outermost frame, as when the frame pointer it finds is 0. */
			if (no_unwind_info(cursor, ip)) {
				rc = n > 1 ? 0 : -1;
				break;
			}
			rc = n < max ? step_fn(cursor) : -1;
		} while (rc > 0);
	}
	/* No caller of the interrupted frame itself is no end: libunwind says so of code
	 * with no unwind information when the frame pointer is 0, as in a switch written
	 * in assembly that has just popped a new coroutine's zeroed registers. */
	if (rc == 0 && n > 1)
		*base = last;
	end_walk(tls, saved);
	return n ? n : -1;
}
