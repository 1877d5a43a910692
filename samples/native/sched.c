/* sched.c: a ucontext coroutine scheduler whose tasks do known CPU work and known
 * waits, built with -finstrument-functions so coprof traces it (the README's demo).
 *
 * usage: sched [ROUNDS] [CRUNCH_MS] [NAP_MS]
 * Two "crunch" tasks each burn CRUNCH_MS of CPU then nap NAP_MS, ROUNDS times; one
 * "sleeper" task naps 3*NAP_MS then burns CRUNCH_MS/10, ROUNDS times. A nap yields
 * once to the scheduler, which resumes the task when its wake time has come and
 * sleeps when no task is ready. Single-threaded.
 *
 * At the end it says what the work and the tasks took by the thread's CPU clock, the
 * one coprof's cpu clock reads: more than asked when the clock jumped inside a burn, as
 * it does on a VM whose host takes the CPU away (the guest counts that time as the
 * running thread's), so a profile can be held to what the program itself measured. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define STACK_SIZE (256 * 1024)

struct task {
	ucontext_t uc;
	const char *label;
	uint64_t wake; /* ns, monotonic: runnable from then on */
	int done;
	char *stack;
	uint64_t resumed; /* ns of thread CPU when the task last started running */
	uint64_t cpu;     /* ns of thread CPU the task has run for */
};

static ucontext_t sched_uc;
static struct task tasks[3];
static struct task *current;
static int rounds = 10;
static unsigned crunch_ms = 20, nap_ms = 10;

__attribute__((no_instrument_function)) static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink; /* keeps the busy loops from being optimised away */
static uint64_t crunch_cpu, sleeper_cpu; /* ns of thread CPU each kind of work took */

/* Burns `ms` of this thread's CPU time, whatever else the machine does. */
static uint64_t burn_cpu(unsigned ms)
{
	uint64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID), now;
	while ((now = clock_ns(CLOCK_THREAD_CPUTIME_ID)) < start + (uint64_t)ms * 1000000u)
		for (int i = 0; i < 1000; i++)
			sink += (uint64_t)i;
	return now - start;
}

/* The task's own CPU clock runs from its resume to its next yield. */
__attribute__((no_instrument_function)) static void task_runs(void)
{
	current->resumed = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

__attribute__((no_instrument_function)) static void task_stops(void)
{
	current->cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - current->resumed;
}

/* Back to the scheduler; returns when the scheduler resumes this task. */
static void task_yield(void)
{
	task_stops();
	swapcontext(&current->uc, &sched_uc);
	task_runs();
}

static void nap(unsigned ms)
{
	current->wake = clock_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000u;
	task_yield();
}

static void crunch_work(void)
{
	crunch_cpu += burn_cpu(crunch_ms);
}

static void sleeper_work(void)
{
	sleeper_cpu += burn_cpu(crunch_ms / 10);
}

static void crunch(void)
{
	task_runs();
	for (int r = 0; r < rounds; r++) {
		crunch_work();
		nap(nap_ms);
	}
	task_stops();
	current->done = 1;
}

static void sleeper(void)
{
	task_runs();
	for (int r = 0; r < rounds; r++) {
		nap(3 * nap_ms);
		sleeper_work();
	}
	task_stops();
	current->done = 1;
}

static void spawn(struct task *t, const char *label, void (*entry)(void))
{
	t->label = label;
	t->stack = malloc(STACK_SIZE);
	if (!t->stack) {
		perror("malloc");
		exit(1);
	}
	getcontext(&t->uc);
	t->uc.uc_stack.ss_sp = t->stack;
	t->uc.uc_stack.ss_size = STACK_SIZE;
	t->uc.uc_link = &sched_uc;
	makecontext(&t->uc, entry, 0);
}

/* Nothing is ready: sleep until the earliest wake time. */
static void idle_until(uint64_t wake)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	if (wake <= now)
		return;
	struct timespec ts = {(time_t)((wake - now) / 1000000000u),
			      (long)((wake - now) % 1000000000u)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void run_scheduler(int n)
{
	int alive = n, next = 0;
	while (alive > 0) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), earliest = UINT64_MAX;
		struct task *pick = NULL;
		for (int k = 0; k < n && !pick; k++) {
			struct task *t = &tasks[(next + k) % n];
			if (t->done)
				continue;
			if (t->wake <= now) {
				pick = t;
				next = (int)(t - tasks + 1) % n;
			} else if (t->wake < earliest) {
				earliest = t->wake;
			}
		}
		if (!pick) {
			idle_until(earliest);
			continue;
		}
		current = pick;
		swapcontext(&sched_uc, &pick->uc);
		current = NULL;
		if (pick->done)
			alive--;
	}
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		crunch_ms = (unsigned)atoi(argv[2]);
	if (argc > 3)
		nap_ms = (unsigned)atoi(argv[3]);
	spawn(&tasks[0], "crunch-1", crunch);
	spawn(&tasks[1], "crunch-2", crunch);
	spawn(&tasks[2], "sleeper", sleeper);
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	run_scheduler(3);
	uint64_t all = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	printf("sched: 3 tasks, %d rounds, %u ms crunch, %u ms nap: %.3f s\n", rounds, crunch_ms,
	       nap_ms, (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	uint64_t in_tasks = tasks[0].cpu + tasks[1].cpu + tasks[2].cpu;
	printf("sched: CPU ms crunch_work %.3f sleeper_work %.3f; tasks crunch-1 %.3f crunch-2 "
	       "%.3f sleeper %.3f; scheduler %.3f\n", crunch_cpu / 1e6, sleeper_cpu / 1e6,
	       tasks[0].cpu / 1e6, tasks[1].cpu / 1e6, tasks[2].cpu / 1e6,
	       (all > in_tasks ? all - in_tasks : 0) / 1e6);
	for (int i = 0; i < 3; i++)
		free(tasks[i].stack);
	return 0;
}
