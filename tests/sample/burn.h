/* burn.h: what traps.c, altstack.c and small-stack.c share: CPU burnt by the thread's
 * own clock, in a frame of its own, so that ticks land there. */
#ifndef BURN_H
#define BURN_H

#include <time.h>

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Burns `s` seconds of the calling thread's CPU time. */
__attribute__((noinline)) static void burn(double s)
{
	double t0 = cpu_s();
	volatile unsigned long x = 0;
	while (cpu_s() - t0 < s)
		x++;
}

#endif
