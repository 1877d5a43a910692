/* waits.c: a program that blocks, for the sample mode tests (tests/sample/run.py).
 *
 * usage: waits usleep|pipe|epoll|cond   ten waits of 100 ms each, one call per wait as
 *                                       a host that does not retry would make them;
 *                                       prints the seconds taken and the number of
 *                                       calls that came back early (EINTR or short)
 *        waits split SECONDS            alternates 1 ms of CPU in burn() with 1 ms
 *                                       asleep in epoll_wait, for SECONDS of wall time */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define WAITS 10
#define WAIT_NS 100000000ull

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

/* About 1 ms of this thread's CPU, most of it in this function's own loop. */
__attribute__((noinline)) static void burn(void)
{
	uint64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + 1000000u;
	while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 20000; i++)
			sink += (uint64_t)i * (uint64_t)i;
}

static int pipefd[2];

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < WAITS; i++) {
		struct timespec ts = {0, (long)WAIT_NS};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		if (write(pipefd[1], "x", 1) != 1)
			return NULL;
	}
	return NULL;
}

/* One wait of 100 ms; returns nonzero when the call came back early. */
static int wait_once(const char *how, int ep, pthread_mutex_t *m, pthread_cond_t *c)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int rc = 0;
	if (strcmp(how, "usleep") == 0) {
		rc = usleep(WAIT_NS / 1000);
	} else if (strcmp(how, "pipe") == 0) {
		char b;
		rc = read(pipefd[0], &b, 1) == 1 ? 0 : -1;
	} else if (strcmp(how, "epoll") == 0) {
		struct epoll_event ev;
		rc = epoll_wait(ep, &ev, 1, (int)(WAIT_NS / 1000000u));
	} else {
		struct timespec abs;
		clock_gettime(CLOCK_REALTIME, &abs);
		abs.tv_nsec += (long)WAIT_NS;
		abs.tv_sec += abs.tv_nsec / 1000000000;
		abs.tv_nsec %= 1000000000;
		pthread_mutex_lock(m);
		rc = pthread_cond_timedwait(c, m, &abs) == ETIMEDOUT ? 0 : -1;
		pthread_mutex_unlock(m);
	}
	/* The pipe's writer wakes the reader after its own 100 ms nap, a little earlier or
	 * later than the reader's last wake: only the total, which holds all ten naps, says
	 * something. */
	uint64_t floor = strcmp(how, "pipe") == 0 ? 0 : WAIT_NS;
	return rc < 0 || now_ns(CLOCK_MONOTONIC) - t0 < floor;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: waits usleep|pipe|epoll|cond | waits split SECONDS\n");
		return 2;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		perror("epoll_create1");
		return 1;
	}
	if (strcmp(argv[1], "split") == 0) {
		double secs = argc > 2 ? atof(argv[2]) : 1.5;
		uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(secs * 1e9);
		while (now_ns(CLOCK_MONOTONIC) < end) {
			struct epoll_event ev;
			burn();
			epoll_wait(ep, &ev, 1, 1);
		}
		return 0;
	}
	pthread_t th;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	/* Before the pipe's writer starts: its ten naps then fit inside the total, however
	 * late this thread runs after creating it. */
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	if (strcmp(argv[1], "pipe") == 0) {
		if (pipe(pipefd) < 0 || pthread_create(&th, NULL, writer, NULL) != 0) {
			perror("pipe");
			return 1;
		}
	}
	int early = 0;
	for (int i = 0; i < WAITS; i++)
		early += wait_once(argv[1], ep, &m, &c);
	printf("%.3f %d\n", (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9, early);
	if (strcmp(argv[1], "pipe") == 0)
		pthread_join(th, NULL);
	return 0;
}
