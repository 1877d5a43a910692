/* fork-walk.c: a process whose threads are sampled often, 64 frames deep and on
 * libunwind's slow path (spin), forks again and again from main. A fork that lands
 * while another thread's tick is inside libunwind's walk gives the child that walk's
 * locks, held by a thread the child does not have; a child that walks then waits for
 * them forever. Each child spins a few milliseconds at the same depth (its ticks walk)
 * and leaves by _exit(0); the parent gives each child 10 s, then kills that child (only
 * it), says so and exits 1. usage: fork-walk [FORKS [THREADS]] (200 and 4). Run by
 * tests/native/safety.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_SPIN_NS 3000000 /* each child's own work: 3 ms, a few ticks at 997 Hz */
#define WAIT_MS 10000	   /* a child not ended by then hung */

static atomic_int stop;
static volatile unsigned long sink;

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Burns CPU until `until` (a time in ns, 0: never) or until stop. Its stack is
 * realigned through a register (a 64-byte-aligned local beside a variable-length
 * array), which libunwind's fast trace cannot step through: every walk from here takes
 * its slow path, a lookup under its global cache's lock per frame. */
__attribute__((noinline)) static void spin(long until, int len)
{
	_Alignas(64) volatile char line[64];
	volatile char vla[len];
	while (!atomic_load_explicit(&stop, memory_order_relaxed) && (!until || now_ns() < until))
		for (int i = 0; i < 1000; i++)
			line[i & 63] = vla[i % len] = (char)i;
	sink += (unsigned long)line[1] + (unsigned long)vla[0];
}

/* Calls itself STEPS deep, each level from a call site of its own, then spins: a stack
 * of as many distinct return addresses, each one more lookup under libunwind's and the
 * loader's locks for a walk whose caches are cold. */
#define STEPS 64
#define CALL(k)                                                                          \
	case k:                                                                          \
		step(n + 1, until);                                                      \
		sink += k;                                                               \
		break;
#define CALL8(b)                                                                         \
	CALL(b * 8 + 0)                                                                  \
	CALL(b * 8 + 1)                                                                  \
	CALL(b * 8 + 2)                                                                  \
	CALL(b * 8 + 3)                                                                  \
	CALL(b * 8 + 4)                                                                  \
	CALL(b * 8 + 5)                                                                  \
	CALL(b * 8 + 6)                                                                  \
	CALL(b * 8 + 7)
__attribute__((noinline)) static void step(int n, long until)
{
	switch (n) {
		CALL8(0)
		CALL8(1)
		CALL8(2)
		CALL8(3)
		CALL8(4)
		CALL8(5)
		CALL8(6)
		CALL8(7)
	default:
		spin(until, 8 + n);
	}
}

static void *spinner(void *arg)
{
	(void)arg;
	step(0, 0);
	return NULL;
}

/* 1 when the child ended with status 0 in time; else 0, the child killed if it hung. */
static int reap(pid_t child, int n)
{
	int st = 0;
	for (long end = now_ns() + WAIT_MS * 1000000L; now_ns() < end;) {
		pid_t w = waitpid(child, &st, WNOHANG);
		if (w == child) {
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				return 1;
			printf("child %d ended with status %#x\n", n, st);
			return 0;
		}
		usleep(1000);
	}
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	printf("child %d hung (killed after %d s)\n", n, WAIT_MS / 1000);
	return 0;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 200;
	int nthreads = argc > 2 ? atoi(argv[2]) : 4;
	pthread_t th[64];
	if (nthreads > 64)
		nthreads = 64;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, spinner, NULL) != 0)
			return 2;
	int ok = 1, done = 0;
	for (; done < forks && ok; done++) {
		fflush(stdout);
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			ok = 0;
			break;
		}
		if (p == 0) {
			step(0, now_ns() + CHILD_SPIN_NS);
			_exit(0);
		}
		ok = reap(p, done);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("forks: %d of %d, %s\n", done, forks, ok ? "all ended" : "FAILED");
	return ok ? 0 : 1;
}
