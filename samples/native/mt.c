/* mt.c: threads with coroutines in each, built with -finstrument-functions.
 *
 * usage: mt [THREADS] [ROUNDS] [WORK_MS]
 * Each thread (named "worker-N") runs its own scheduler over two coroutines, "ping"
 * and "pong", which take turns: each burns WORK_MS of CPU then yields, ROUNDS times.
 * The main thread only starts and joins the workers. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define STACK_SIZE (128 * 1024)

struct worker {
	pthread_t id;
	int index;
	ucontext_t main_uc, uc[2];
	char *stack[2];
	int done[2];
};

static int rounds = 5;
static unsigned work_ms = 10;
static __thread struct worker *self;
static __thread int running;

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink; /* keeps the busy loops from being optimised away */

static void burn(unsigned ms)
{
	uint64_t end = cpu_ns() + (uint64_t)ms * 1000000u;
	while (cpu_ns() < end)
		for (int i = 0; i < 1000; i++)
			sink += (uint64_t)i;
}

static void yield(void)
{
	swapcontext(&self->uc[running], &self->main_uc);
}

static void ping(void)
{
	for (int r = 0; r < rounds; r++) {
		burn(work_ms);
		yield();
	}
	self->done[0] = 1;
}

static void pong(void)
{
	for (int r = 0; r < rounds; r++) {
		burn(work_ms);
		yield();
	}
	self->done[1] = 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	void (*entry[2])(void) = {ping, pong};
	self = w;
	for (int i = 0; i < 2; i++) {
		w->stack[i] = malloc(STACK_SIZE);
		if (!w->stack[i])
			return NULL;
		getcontext(&w->uc[i]);
		w->uc[i].uc_stack.ss_sp = w->stack[i];
		w->uc[i].uc_stack.ss_size = STACK_SIZE;
		w->uc[i].uc_link = &w->main_uc;
		makecontext(&w->uc[i], entry[i], 0);
	}
	while (!w->done[0] || !w->done[1])
		for (running = 0; running < 2; running++)
			if (!w->done[running])
				swapcontext(&w->main_uc, &w->uc[running]);
	for (int i = 0; i < 2; i++)
		free(w->stack[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (argc > 3)
		work_ms = (unsigned)atoi(argv[3]);
	if (n < 1 || n > 64)
		n = 2;
	struct worker *w = calloc((size_t)n, sizeof(*w));
	if (!w)
		return 1;
	for (int i = 0; i < n; i++) {
		char name[32];
		w[i].index = i;
		if (pthread_create(&w[i].id, NULL, worker_main, &w[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
		snprintf(name, sizeof(name), "worker-%d", i);
		pthread_setname_np(w[i].id, name);
	}
	for (int i = 0; i < n; i++)
		pthread_join(w[i].id, NULL);
	printf("mt: %d threads x 2 coroutines x %d rounds of %u ms\n", n, rounds, work_ms);
	free(w);
	return 0;
}
