/* uc-stuck.c: a coroutine that leaves by setcontext to a getcontext point in main,
 * after which main works 400 ms in burn_main, through no switch hook. Run by
 * tests/native/safety.py. */
#include <stdio.h>
#include <time.h>
#include <ucontext.h>

static ucontext_t main_uc, co_uc;
static volatile int back;

/* CPU time, so that a loaded machine shrinks neither burn against the other (a
 * 100 ms wall-clock burn got no tick at 99 Hz when the process was starved) */
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void burn_co(void)
{
	double t = now();
	volatile unsigned long x = 0;
	while (now() - t < 0.1)
		x++;
}

__attribute__((noinline)) static void burn_main(void)
{
	double t = now();
	volatile unsigned long x = 0;
	while (now() - t < 0.4)
		x++;
}

static void co_entry(void)
{
	burn_co();
	setcontext(&main_uc);
}

int main(void)
{
	static char stack[256 * 1024];
	getcontext(&co_uc);
	co_uc.uc_stack.ss_sp = stack;
	co_uc.uc_stack.ss_size = sizeof(stack);
	co_uc.uc_link = NULL;
	makecontext(&co_uc, co_entry, 0);
	back = 0;
	getcontext(&main_uc);
	if (!back) {
		back = 1;
		setcontext(&co_uc);
	}
	burn_main();
	puts("done");
	return 0;
}
