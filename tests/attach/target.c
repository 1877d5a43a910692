/* target.c: a program started without coprof, for tests/attach/attach.py to attach to.
 *   target busy     spins in two functions, each round twice (a register a stop
 *                   changed shows as MISMATCH, exit 3); prints "ready", then the
 *                   rounds each second
 *   target sleep N  N times: one nanosleep of a second, then prints how long it took
 *                   (ns, CLOCK_MONOTONIC), as measured by the program itself
 *   target threads  busy, in the main thread and in two more threads
 *   target seccomp  busy, under a seccomp filter (one that allows everything)
 *   target main-exits  a busy thread runs on after main's pthread_exit
 *   target forks    sleeps a second, forks, and both are busy
 *   target gaps     busy, printing the longest pause between two rounds every 250 ms
 *                   (bench/attach/stop.py)
 *   target orders   busy, and takes orders on stdin, a line each, from a thread that
 *                   reads them: "thread" starts a busy thread (late_thread) and prints
 *                   "started"; "exec" execs env (which prints the environment);
 *                   "_exit" leaves through _exit(0); "map" maps the shim's file
 *                   again, private and writable, at offset 0 (as libdw maps a file it
 *                   reads), and prints "mapped"
 *   target coros    main runs ucontext coroutines in turn, each spinning a round at a
 *                   time: two made at its start (old_coro), and one more (new_coro,
 *                   printing "made") for each order "coro" on stdin, read as in orders
 *   target getattr FIFO  (root) the main thread blocks in a read inside
 *                   pthread_getattr_np, holding its own thread's lock: in a mount
 *                   namespace of its own, FIFO is bound over /proc/self/maps while main
 *                   opens it (then unbound); a busy thread runs, and a thread that
 *                   reads orders prints "ready" once main is blocked, and on "release"
 *                   closes the FIFO's writer: main then prints "main free" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static volatile uint64_t sink;

/* Integer and SSE registers live across the loop: a stop here that did not put them
 * back exactly gives another result than the same call made again. */
__attribute__((noinline)) static uint64_t spin_inner(uint64_t x)
{
	double f = (double)(x >> 12);
	for (int i = 0; i < 1000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		f = f * 0.999 + (double)(x >> 40);
	}
	return x ^ (uint64_t)f;
}

__attribute__((noinline)) static uint64_t spin_outer(uint64_t x)
{
	for (int i = 0; i < 100; i++)
		x = spin_inner(x);
	return x;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for ever, each round computed twice: a stop that changed a register gives two
 * results, and the program says MISMATCH and exits 3. Prints the rounds each second. */
static void busy(void)
{
	uint64_t x = 1, rounds = 0, next = now_ns() + 1000000000u;
	for (;;) {
		uint64_t a = spin_outer(x), b = spin_outer(x);
		if (a != b) {
			printf("MISMATCH at round %llu\n", (unsigned long long)rounds);
			exit(3);
		}
		x = a;
		rounds++;
		if (now_ns() >= next) {
			printf("rounds %llu\n", (unsigned long long)rounds);
			next += 1000000000u;
		}
		sink = x;
	}
}

static void *busy_thread(void *arg)
{
	(void)arg;
	uint64_t x = 7;
	for (;;) {
		uint64_t a = spin_outer(x), b = spin_outer(x);
		if (a != b) {
			printf("MISMATCH in a thread\n");
			exit(3);
		}
		sink = x = a;
	}
	return NULL;
}

/* A thread the program starts once coprof may be attached. */
__attribute__((noinline)) static void *late_thread(void *arg)
{
	(void)arg;
	uint64_t x = 11;
	for (;;)
		sink = x = spin_outer(x);
	return NULL;
}

/* coros: the coroutines, main's context, and orders of "coro" not served yet */
#define MAX_COROS 8
static ucontext_t coro_main, coros[MAX_COROS];
static int ncoros;
static volatile int coros_wanted;

/* A round of spinning, then back to main, for ever. */
__attribute__((noinline)) static void old_coro(int k)
{
	uint64_t x = (uint64_t)k + 3;
	for (;;) {
		sink = x = spin_outer(x);
		swapcontext(&coros[k], &coro_main);
	}
}

__attribute__((noinline)) static void new_coro(int k)
{
	uint64_t x = (uint64_t)k + 5;
	for (;;) {
		sink = x = spin_outer(x);
		swapcontext(&coros[k], &coro_main);
	}
}

static void make_coro(void (*fn)(int))
{
	static char stacks[MAX_COROS][128 * 1024];
	ucontext_t *uc = &coros[ncoros];
	getcontext(uc);
	uc->uc_stack.ss_sp = stacks[ncoros];
	uc->uc_stack.ss_size = sizeof(stacks[ncoros]);
	uc->uc_link = NULL; /* they never return */
	makecontext(uc, (void (*)(void))fn, 1, ncoros);
	ncoros++;
}

static void run_coros(void)
{
	make_coro(old_coro);
	make_coro(old_coro);
	printf("ready\n");
	for (int k = 0;; k = (k + 1) % ncoros) {
		if (coros_wanted && ncoros < MAX_COROS) {
			coros_wanted--;
			make_coro(new_coro);
			printf("made\n");
		}
		swapcontext(&coro_main, &coros[k]);
	}
}

/* Maps the file of the loaded shim again, as libdw's reading of it does. */
static void map_shim(void)
{
	char line[4096], path[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	path[0] = 0;
	while (f && !path[0] && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		if (p && strstr(p, "libcoprof-preload.so")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(path, sizeof(path), "%s", p);
		}
	}
	if (f)
		fclose(f);
	int fd = path[0] ? open(path, O_RDONLY) : -1;
	if (fd >= 0 && mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) != MAP_FAILED)
		printf("mapped\n");
	if (fd >= 0)
		close(fd);
}

/* Loads ATTACH_LATE_LIB (late.c), waits up to 10 s for its calls of
 * pthread_create to be bound to the shim's, says whether they were ("bound" or
 * "unbound"), and has it start its thread ("late started"). */
static void load_late(void)
{
#ifdef TARGET_STATIC /* no dlopen in a static build (attach refuses it anyway) */
	printf("no library\n");
#else
	const char *path = getenv("ATTACH_LATE_LIB");
	void *h = path ? dlopen(path, RTLD_NOW) : NULL;
	int (*bound)(void) = h ? (int (*)(void))dlsym(h, "late_bound") : NULL;
	int (*start)(void) = h ? (int (*)(void))dlsym(h, "late_start") : NULL;
	if (!bound || !start) {
		printf("no library\n");
		return;
	}
	for (int i = 0; i < 200 && !bound(); i++) {
		struct timespec t = {0, 50000000};
		nanosleep(&t, NULL);
	}
	printf(bound() ? "bound\n" : "unbound\n");
	if (start() == 0)
		printf("late started\n");
#endif
}

static void *orders(void *arg)
{
	(void)arg;
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "thread")) {
			pthread_t t;
			if (pthread_create(&t, NULL, late_thread, NULL) == 0)
				printf("started\n");
		} else if (!strcmp(line, "exec")) {
			execl("/usr/bin/env", "env", (char *)NULL);
			perror("exec");
		} else if (!strcmp(line, "_exit")) {
			_exit(0);
		} else if (!strcmp(line, "map")) {
			map_shim();
		} else if (!strcmp(line, "coro")) {
			__atomic_add_fetch(&coros_wanted, 1, __ATOMIC_RELEASE);
		} else if (!strcmp(line, "dlopen")) {
			load_late();
		}
	}
	return NULL;
}

static int fifo_writer = -1;

/* target getattr: waits for main's read of the FIFO, unbinds it, and takes orders. */
static void *getattr_orders(void *arg)
{
	char path[64], line[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)getpid());
	for (int blocked = 0; !blocked;) {
		FILE *f = fopen(path, "re");
		blocked = f && fgets(line, sizeof(line), f) && !strncmp(line, "0 ", 2);
		if (f)
			fclose(f);
		struct timespec t = {0, 10000000};
		nanosleep(&t, NULL);
	}
	if (umount2((const char *)arg, MNT_DETACH) != 0) {
		perror("umount2");
		exit(1);
	}
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		if (!strcmp(line, "release\n"))
			close(fifo_writer);
	return NULL;
}

static int getattr_held(const char *fifo)
{
	if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		perror("mount namespace");
		return 1;
	}
	static char maps[64];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)getpid());
	if ((fifo_writer = open(fifo, O_RDWR)) < 0 || mount(fifo, maps, NULL, MS_BIND, NULL) != 0) {
		perror(fifo);
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, busy_thread, NULL);
	pthread_create(&t, NULL, getattr_orders, maps);
	pthread_attr_t a;
	if (pthread_getattr_np(pthread_self(), &a) == 0)
		pthread_attr_destroy(&a);
	printf("main free\n");
	busy();
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "sleep")) {
		int n = atoi(argv[2]);
		printf("ready\n");
		for (int i = 0; i < n; i++) {
			struct timespec one = {1, 0};
			uint64_t t0 = now_ns();
			int rc = nanosleep(&one, NULL);
			printf("slept %llu ns rc %d\n", (unsigned long long)(now_ns() - t0), rc);
		}
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "getattr"))
		return getattr_held(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "seccomp")) {
		/* a filter that allows everything: the process is filtered all the same */
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = {.len = 1, .filter = &allow};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
			perror("seccomp");
			return 1;
		}
	} else if (argc == 2 && !strcmp(argv[1], "forks")) {
		/* busy; after a second, a child, busy too */
		printf("ready\n");
		struct timespec one = {1, 0};
		while (nanosleep(&one, &one) != 0)
			;
		pid_t child = fork();
		if (child == 0)
			printf("child %d\n", (int)getpid());
		busy();
	} else if (argc == 2 && !strcmp(argv[1], "gaps")) {
		/* for bench/attach: the longest time between two rounds, each 250 ms */
		printf("ready\n");
		uint64_t x = 1, last = now_ns(), worst = 0, next = last + 250000000u;
		for (;;) {
			x = spin_inner(x);
			uint64_t t = now_ns();
			worst = t - last > worst ? t - last : worst;
			last = t;
			if (t >= next) {
				printf("gap %.3f\n", (double)worst / 1e6);
				worst = 0;
				next = t + 250000000u;
				last = now_ns();
			}
			sink = x;
		}
	} else if (argc == 2 && !strcmp(argv[1], "main-exits")) {
		pthread_t t;
		pthread_create(&t, NULL, busy_thread, NULL);
		printf("ready\n");
		pthread_exit(NULL);
	} else if (argc == 2 && !strcmp(argv[1], "orders")) {
		pthread_t t;
		pthread_create(&t, NULL, orders, NULL);
	} else if (argc == 2 && !strcmp(argv[1], "coros")) {
		pthread_t t;
		pthread_create(&t, NULL, orders, NULL);
		run_coros();
	} else if (argc == 2 && !strcmp(argv[1], "threads")) {
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, busy_thread, NULL);
	} else if (argc != 2 || strcmp(argv[1], "busy")) {
		fprintf(stderr, "usage: target busy|threads|orders|coros|seccomp|main-exits|forks|gaps|sleep N|getattr FIFO\n");
		return 2;
	}
	printf("ready\n");
	busy();
	return 0;
}
