/* clock-steps.c: how far the raw TSC wall clock steps back at a resync, before the
 * monotonic clamp (clock.c) hides it: the rate calibration's quality, a statistic of
 * the machine and its load, so a bench and not a test (tests/clock holds the exact
 * property: the clamped clock never goes back). Each round runs three threads on two
 * CPUs that read the clock 200,000 times each, yielding every 1,000 reads so they
 * migrate and are preempted; a round's figure is the largest step back any of them
 * saw. Prints each round's figure, then the median and the largest, in ns.
 *
 * usage: clock-steps [ROUNDS (default 21)] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"

#define THREADS 3
#define READS 200000

static void *read_wall(void *arg)
{
	uint64_t *back = arg;
	struct cp_clock w;
	cp_clock_init(&w, COPROF_CLOCK_WALL);
	uint64_t prev = cp_clock_read(&w);
	for (int i = 0; i < READS; i++) {
		uint64_t v = cp_clock_read(&w);
		if (v < prev && prev - v > *back)
			*back = prev - v;
		prev = v;
		if (i % 1000 == 0)
			sched_yield();
	}
	cp_clock_fini(&w);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 21;
	if (rounds < 1 || rounds > 1000) {
		fprintf(stderr, "usage: clock-steps [ROUNDS 1-1000]\n");
		return 2;
	}
	if (cp_clock_force(COPROF_CLOCK_WALL, "tsc-wall") != 0) {
		fprintf(stderr, "clock-steps: no TSC wall clock on this machine\n");
		return 1;
	}
	cpu_set_t have, want;
	CPU_ZERO(&want);
	if (sched_getaffinity(0, sizeof(have), &have) == 0) {
		for (int i = 0, n = 0; i < CPU_SETSIZE && n < 2; i++)
			if (CPU_ISSET(i, &have)) {
				CPU_SET(i, &want);
				n++;
			}
		sched_setaffinity(0, sizeof(want), &want);
	}
	uint64_t *worst = calloc((size_t)rounds, sizeof(*worst));
	if (!worst)
		return 1;
	for (int r = 0; r < rounds; r++) {
		uint64_t back[THREADS] = {0};
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			pthread_create(&t[i], NULL, read_wall, &back[i]);
		for (int i = 0; i < THREADS; i++) {
			pthread_join(t[i], NULL);
			if (back[i] > worst[r])
				worst[r] = back[i];
		}
		printf("round %d: %llu ns\n", r + 1, (unsigned long long)worst[r]);
	}
	qsort(worst, (size_t)rounds, sizeof(*worst), by_value);
	printf("largest step back per round: median %llu ns, max %llu ns, over %d rounds\n",
	       (unsigned long long)worst[rounds / 2], (unsigned long long)worst[rounds - 1], rounds);
	free(worst);
	return 0;
}
