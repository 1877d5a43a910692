/* uc-preempt.c: preemptive green threads. Two coroutines, green_a and green_b, burn CPU
 * while a SIGALRM timer (every 2 ms) switches between them with swapcontext from inside
 * its handler, for 400 ms. Built with -DCOUNT_ALLOC it also counts the allocations made
 * while the handler runs (it allocates nothing itself: any are the profiler's) and
 * prints them. `uc-preempt toggle` raises SIGUSR2 as the timer starts (run it with the
 * profiler waiting for that signal: the window opens while the handler switches).
 * Run by tests/native/safety.py. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

static ucontext_t main_uc, green[2];
static volatile int cur;
static __thread volatile sig_atomic_t in_handler; /* this thread is in on_alarm */
static volatile unsigned long switches;
static double deadline;

#ifdef COUNT_ALLOC
static volatile unsigned long allocs_in_handler;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n)
{
	allocs_in_handler += in_handler;
	return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
	allocs_in_handler += in_handler;
	return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
	allocs_in_handler += in_handler;
	return __libc_realloc(p, n);
}
void free(void *p)
{
	__libc_free(p);
}
#endif

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_alarm(int sig)
{
	(void)sig;
	in_handler = 1;
	int from = cur;
	cur = !from;
	switches++;
	swapcontext(&green[from], &green[!from]);
	in_handler = 0; /* resumed: back in this green thread's own handler frame */
}

__attribute__((noinline)) static void green_work(void)
{
	volatile unsigned long x = 0;
	while (now() < deadline)
		x++;
}

static void green_a(void)
{
	swapcontext(&green[0], &main_uc); /* started: wait for the timer */
	green_work();
}

static void green_b(void)
{
	swapcontext(&green[1], &main_uc);
	green_work();
}

/* Makes green thread i and runs it to its first yield. */
static void start_green(int i, void (*fn)(void))
{
	static char stacks[2][256 * 1024];
	getcontext(&green[i]);
	green[i].uc_stack.ss_sp = stacks[i];
	green[i].uc_stack.ss_size = sizeof(stacks[i]);
	green[i].uc_link = &main_uc;
	makecontext(&green[i], fn, 0);
	swapcontext(&main_uc, &green[i]);
}

int main(int argc, char **argv)
{
	start_green(0, green_a);
	start_green(1, green_b);
	struct sigaction sa = {.sa_handler = on_alarm};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	deadline = now() + 0.4;
	struct itimerval it = {{0, 2000}, {0, 2000}};
	setitimer(ITIMER_REAL, &it, NULL);
	cur = 0;
	if (argc > 1 && strcmp(argv[1], "toggle") == 0)
		raise(SIGUSR2);
	swapcontext(&main_uc, &green[0]); /* back here when one of them returns */
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	in_handler = 0;
	int other = !cur;
	cur = other;
	swapcontext(&main_uc, &green[other]); /* the other returns from its handler too */
	in_handler = 0;
	printf("switches %lu\n", switches);
#ifdef COUNT_ALLOC
	printf("allocations in the handler: %lu\n", allocs_in_handler);
#endif
	puts("done");
	return 0;
}
