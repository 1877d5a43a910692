/* sampler-stack.c: the tick handler's own stack, one per sampled thread.
 *
 * The handler needs some 10 KiB (libunwind's cursor, the Python sample, the record):
 * too much to take from whatever stack a tick interrupts (a coroutine's small stack, the
 * program's alternate signal stack). Each thread maps a stack of its own at its start,
 * outside any signal, with a guard page below. Where the thread has no alternate signal
 * stack of the program's, this one is installed as the thread's, so the kernel delivers
 * ticks on it (SA_ONSTACK); where the program has one (then or later), the handler moves
 * onto this stack itself before its deep work. The program is shown its own alternate
 * stack, never this one (the sigaltstack interposer, signal-guard.c). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler.h"

#define TICK_STACK (64u * 1024) /* the handler needs ~10 KiB; a program handler may run here */
#define GUARD 4096u		/* PROT_NONE below the stack: an overflow faults */

/* Every thread's tick stack is listed by a link at its top, above the usable part: a
 * fork child unmaps those of the threads that did not come along. */
struct link {
	struct link *next, *prev;
};
#define MAPPING (GUARD + TICK_STACK + sizeof(struct link))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct link all = {&all, &all};
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The calling thread's tick stack: [lo, hi) is usable, its link right above; hi 0:
 * none. `installed`: it is the thread's alternate signal stack as far as this thread
 * last set or was told. Initial-exec: the handler reads it. */
static __thread struct {
	uintptr_t lo, hi;
	int installed;
} ts __attribute__((tls_model("initial-exec")));

static void unmap(uintptr_t lo)
{
	munmap((void *)(lo - GUARD), MAPPING);
}

static void after_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	struct link *own = ts.hi ? (struct link *)ts.hi : NULL;
	for (struct link *l = all.next, *next; l != &all; l = next) {
		next = l->next;
		if (l != own)
			unmap((uintptr_t)l - TICK_STACK);
	}
	all.next = all.prev = &all;
	if (own) {
		own->next = own->prev = &all;
		all.next = all.prev = own;
	}
}

static void at_fork(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

/* The kernel's sigaltstack, past the shim's interposer (glibc's has no state). */
int pl_real_sigaltstack(const stack_t *ss, stack_t *old)
{
	return (int)syscall(SYS_sigaltstack, ss, old);
}

/* Makes the tick stack the thread's alternate signal stack. SS_AUTODISARM (Linux 4.7):
 * while a handler runs on it the thread has none, so that a handler of the program's
 * that switches away from it (green threads) leaves its frames there unharmed. */
static void install(void)
{
	stack_t ss = {.ss_sp = (void *)ts.lo, .ss_size = ts.hi - ts.lo, .ss_flags = SS_AUTODISARM};
	if (pl_real_sigaltstack(&ss, NULL) != 0) {
		ss.ss_flags = 0;
		if (pl_real_sigaltstack(&ss, NULL) != 0)
			return;
	}
	ts.installed = 1;
}

void pl_tick_stack_start(void)
{
	if (ts.hi)
		return; /* a fork child's thread keeps its parent's */
	pthread_once(&once, at_fork);
	char *m = mmap(NULL, MAPPING, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return;
	if (mprotect(m, GUARD, PROT_NONE) != 0) {
		munmap(m, MAPPING);
		return;
	}
	ts.lo = (uintptr_t)m + GUARD;
	ts.hi = ts.lo + TICK_STACK;
	struct link *l = (struct link *)ts.hi;
	pthread_mutex_lock(&lock);
	l->next = all.next;
	l->prev = &all;
	all.next->prev = l;
	all.next = l;
	pthread_mutex_unlock(&lock);
	stack_t cur;
	if (pl_real_sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE))
		install();
}

void pl_tick_stack_exit(void)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (!ts.hi || here - ts.lo < ts.hi - ts.lo)
		return; /* exiting from a handler that runs on it: it stays */
	stack_t cur, off = {.ss_flags = SS_DISABLE};
	if (pl_real_sigaltstack(NULL, &cur) != 0)
		return;
	if (pl_tick_stack_owns(&cur))
		pl_real_sigaltstack(&off, NULL);
	else if (ts.installed && (cur.ss_flags & SS_DISABLE))
		return; /* disarmed: a handler's frames are on it, switched away from */
	struct link *l = (struct link *)ts.hi;
	pthread_mutex_lock(&lock);
	l->prev->next = l->next;
	l->next->prev = l->prev;
	pthread_mutex_unlock(&lock);
	/* A tick from now on runs in place: none may switch to a stack being unmapped. */
	uintptr_t lo = ts.lo;
	ts.lo = ts.hi = 0;
	ts.installed = 0;
	atomic_signal_fence(memory_order_seq_cst);
	unmap(lo);
}

int pl_tick_stack_owns(const stack_t *ss)
{
	return ts.hi && !(ss->ss_flags & SS_DISABLE) && (uintptr_t)ss->ss_sp == ts.lo &&
	       ss->ss_size == ts.hi - ts.lo;
}

int pl_tick_stack_holds(uintptr_t sp)
{
	return ts.hi && sp - ts.lo < ts.hi - ts.lo;
}

void pl_tick_stack_program_set(int own)
{
	if (own)
		ts.installed = 0;
	else if (ts.hi)
		install();
}

#if defined(__x86_64__)
/* pl_tick_call_on(fn, arg, top): calls fn(arg) with the stack pointer at `top` (16-aligned)
 * and returns on the caller's stack. The frame pointer holds the caller's stack
 * pointer, and the unwind information says so: libunwind walks from fn through here
 * to the handler and the signal frame. */
void pl_tick_call_on(void (*fn)(void *), void *arg, uintptr_t top);
__asm__(".text\n"
	".globl pl_tick_call_on\n"
	".hidden pl_tick_call_on\n"
	".type pl_tick_call_on, @function\n"
	"pl_tick_call_on:\n"
	".cfi_startproc\n"
	"	pushq %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"	movq %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"	movq %rdx, %rsp\n"
	"	movq %rdi, %rax\n"
	"	movq %rsi, %rdi\n"
	"	callq *%rax\n"
	"	movq %rbp, %rsp\n"
	".cfi_def_cfa_register %rsp\n"
	"	popq %rbp\n"
	".cfi_def_cfa_offset 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size pl_tick_call_on, .-pl_tick_call_on\n");
#endif

/* async-signal-safe */
void pl_tick_stack_run(void (*fn)(void *), void *arg, const ucontext_t *uc)
{
#if defined(__x86_64__)
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	/* On it already (the kernel delivered there), or it is the thread's alternate
	 * stack and was disarmed when the tick came: a handler of the program's left its
	 * frames on it and switched away. Otherwise it is free. */
	int busy = ts.installed && uc && (uc->uc_stack.ss_flags & SS_DISABLE);
	if (ts.hi && here - ts.lo >= ts.hi - ts.lo && !busy) {
		pl_tick_call_on(fn, arg, ts.hi);
		return;
	}
#else
	(void)uc;
#endif
	fn(arg);
}
