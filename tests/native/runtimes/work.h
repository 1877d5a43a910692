/* work.h: what the runtime test programs share: CPU burnt by the thread's own clock,
 * and the rounds each of a heavy and a light coroutine runs (argv: ROUNDS HEAVY_MS
 * LIGHT_MS). Each round a coroutine works, then yields through task_yield. At the end
 * a program says how much CPU time each coroutine's work took by that clock
 * (rt_report): more than it asked for when the clock jumped inside a burn, as it does
 * on a VM whose host takes the CPU away (the guest counts that time as the thread's).
 * It says too what the thread took in all from rt_parse on: what is not the work (the
 * switches, the runtime's scheduler, the hooks) is the rest, and a jump that fell there
 * shows in it. */
#ifndef RT_WORK_H
#define RT_WORK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline __attribute__((no_instrument_function)) double rt_cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static volatile unsigned long rt_sink; /* keeps the busy loop from being optimised out */

enum rt_kind { RT_HEAVY, RT_LIGHT };
static double rt_spent[2]; /* ms of CPU each kind's rt_burn calls took */
static double rt_start;    /* the thread's CPU ms at rt_parse */

static inline __attribute__((no_instrument_function)) void rt_burn(double ms, enum rt_kind kind)
{
	double start = rt_cpu_ms(), now;
	while ((now = rt_cpu_ms()) < start + ms)
		for (int i = 0; i < 1000; i++)
			rt_sink = rt_sink + (unsigned long)i;
	rt_spent[kind] += now - start;
}

/* The line runtimes.py reads. */
static inline __attribute__((no_instrument_function)) void rt_report(const char *prog, int rounds)
{
	printf("%s: %d rounds done; work ms heavy %.3f light %.3f; thread ms %.3f\n", prog, rounds,
	       rt_spent[RT_HEAVY], rt_spent[RT_LIGHT], rt_cpu_ms() - rt_start);
}

struct rt_args {
	int rounds;
	double heavy_ms, light_ms;
};

static inline __attribute__((no_instrument_function)) struct rt_args rt_parse(int argc, char **argv)
{
	struct rt_args a = {5, 20, 5};
	rt_start = rt_cpu_ms();
	if (argc > 1)
		a.rounds = atoi(argv[1]);
	if (argc > 2)
		a.heavy_ms = atof(argv[2]);
	if (argc > 3)
		a.light_ms = atof(argv[3]);
	return a;
}

#endif
