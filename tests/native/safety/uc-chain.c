/* uc-chain.c: coroutine b_entry switches to coroutine a_entry, which returns; a's
 * uc_link is the point b saved, so b resumes there (not through a switch) and works
 * 400 ms in b_work. Run by tests/native/safety.py. */
#include <stdio.h>
#include <time.h>
#include <ucontext.h>

static ucontext_t main_uc, a_uc, b_uc, b_saved;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void burn(double s)
{
	double t = now();
	volatile unsigned long x = 0;
	while (now() - t < s)
		x++;
}

__attribute__((noinline)) static void b_work(void)
{
	burn(0.4);
}

static void a_entry(void)
{
	burn(0.05);
}

static void b_entry(void)
{
	swapcontext(&b_saved, &a_uc);
	b_work();
}

int main(void)
{
	static char sa[256 * 1024], sb[256 * 1024];
	getcontext(&b_uc);
	b_uc.uc_stack.ss_sp = sb;
	b_uc.uc_stack.ss_size = sizeof(sb);
	b_uc.uc_link = &main_uc;
	makecontext(&b_uc, b_entry, 0);
	getcontext(&a_uc);
	a_uc.uc_stack.ss_sp = sa;
	a_uc.uc_stack.ss_size = sizeof(sa);
	a_uc.uc_link = &b_saved;
	makecontext(&a_uc, a_entry, 0);
	swapcontext(&main_uc, &b_uc);
	puts("done");
	return 0;
}
