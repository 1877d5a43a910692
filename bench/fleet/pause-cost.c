/* pause-cost.c: how long writing one window holds a program's threads. A worker thread
 * calls 10,000 distinct functions (enter+leave pairs) in a loop and records its longest
 * single pair; the main thread meanwhile cuts windows with coprof_dump_clear, as the
 * shim's control thread does with COPROF_INTERVAL. Runs the worker alone first, for
 * the same time, as the baseline. usage: pause-cost DIR [WINDOWS] */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h" /* p->last_pause_ns: the internal library, like bench/engine */

#define NFUNCS 10000

static struct coprof *prof;
static atomic_int stop;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int names(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	static char buf[NFUNCS + 1][24];
	(void)arg;
	if (key == 0 || key > NFUNCS)
		return -ENOENT;
	snprintf(buf[key], sizeof(buf[key]), "gen_fn_%u", (unsigned)key - 1);
	*out = (struct coprof_func_info){"funcs10k.c", (unsigned)key + 3, buf[key]};
	return 0;
}

struct result {
	uint64_t max_ns; /* longest enter+leave pair */
	uint64_t pairs;
	uint64_t over_100us;
};

static void *worker(void *arg)
{
	struct result *r = arg;
	struct coprof_thread *t;
	if (coprof_thread_register(prof, "worker", &t))
		return NULL;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		for (uintptr_t k = 1; k <= NFUNCS; k++) {
			uint64_t a = now_ns();
			coprof_enter(t, k);
			coprof_leave(t, k);
			uint64_t d = now_ns() - a;
			r->pairs++;
			if (d > r->max_ns)
				r->max_ns = d;
			r->over_100us += d > 100000;
		}
	coprof_thread_exit(t);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Runs the worker for `windows` periods of 200 ms; with `cut`, cuts a window at the
 * end of each period and records how long coprof_dump_clear took. */
static void run(const char *dir, int windows, int cut, struct result *r, uint64_t *write_ns,
		uint64_t *pause_ns, off_t *bytes)
{
	pthread_t th;
	atomic_store(&stop, 0);
	pthread_create(&th, NULL, worker, r);
	for (int i = 0; i < windows; i++) {
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
		if (!cut)
			continue;
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/w.%d.pstat", dir, i + 1);
		uint64_t a = now_ns();
		int rc = coprof_dump_clear(prof, path);
		write_ns[i] = now_ns() - a;
		pause_ns[i] = prof->last_pause_ns;
		if (rc) {
			fprintf(stderr, "pause-cost: %s: %s\n", path, coprof_strerror(rc));
			exit(1);
		}
		bytes[i] = stat(path, &st) == 0 ? st.st_size : 0;
		unlink(path);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	int windows = argc > 2 ? atoi(argv[2]) : 10;
	if (windows < 1 || windows > 1000)
		return 2;
	struct coprof_options opt = {.clock = COPROF_CLOCK_WALL};
	if (coprof_create(&opt, &prof) || coprof_add_resolver(prof, names, NULL) ||
	    coprof_start(prof))
		return 1;
	uint64_t *write_ns = calloc((size_t)windows, sizeof(*write_ns));
	uint64_t *pause_ns = calloc((size_t)windows, sizeof(*pause_ns));
	off_t *bytes = calloc((size_t)windows, sizeof(*bytes));
	struct result base = {0}, with = {0};
	run(dir, windows, 0, &base, write_ns, pause_ns, bytes);
	coprof_clear(prof);
	run(dir, windows, 1, &with, write_ns, pause_ns, bytes);
	qsort(write_ns, (size_t)windows, sizeof(*write_ns), cmp_u64);
	qsort(pause_ns, (size_t)windows, sizeof(*pause_ns), cmp_u64);
	printf("windows: %d of 200 ms, %d functions, %lld bytes each (last)\n", windows, NFUNCS,
	       (long long)bytes[windows - 1]);
	printf("coprof_dump_clear (snapshot, resolve, write): median %.2f ms, max %.2f ms\n",
	       write_ns[windows / 2] / 1e6, write_ns[windows - 1] / 1e6);
	printf("writers held (copy + clear): median %.1f us, max %.1f us\n",
	       pause_ns[windows / 2] / 1e3, pause_ns[windows - 1] / 1e3);
	printf("worker, no windows:   %llu pairs, longest %.1f us, %llu over 100 us\n",
	       (unsigned long long)base.pairs, base.max_ns / 1e3,
	       (unsigned long long)base.over_100us);
	printf("worker, with windows: %llu pairs, longest %.1f us, %llu over 100 us\n",
	       (unsigned long long)with.pairs, with.max_ns / 1e3,
	       (unsigned long long)with.over_100us);
	coprof_stop(prof);
	coprof_destroy(prof);
	free(write_ns);
	free(pause_ns);
	free(bytes);
	return 0;
}
