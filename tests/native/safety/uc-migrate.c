/* uc-migrate.c: coroutine x_entry suspends on the main thread, is resumed by another
 * thread, works 200 ms there and finishes there; the main thread then sleeps 500 ms.
 * Run by tests/native/safety.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <ucontext.h>

static ucontext_t a_main, b_main, x_uc, x_saved;

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

static void x_entry(void)
{
	swapcontext(&x_saved, &a_main);
	burn(0.2); /* on the other thread */
}

static void *other(void *arg)
{
	(void)arg;
	swapcontext(&b_main, &x_saved);
	return NULL;
}

int main(void)
{
	static char st[256 * 1024];
	getcontext(&x_uc);
	x_uc.uc_stack.ss_sp = st;
	x_uc.uc_stack.ss_size = sizeof(st);
	x_uc.uc_link = &b_main;
	makecontext(&x_uc, x_entry, 0);
	swapcontext(&a_main, &x_uc);
	pthread_t b;
	pthread_create(&b, NULL, other, NULL);
	pthread_join(b, NULL);
	struct timespec ts = {0, 500000000};
	while (nanosleep(&ts, &ts))
		;
	puts("done");
	return 0;
}
