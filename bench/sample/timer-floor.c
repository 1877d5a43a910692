/* timer-floor.c: what the machine charges a busy thread for a timer interrupt, with
 * nothing of coprof's loaded: the floor under any sampler's cost per tick.
 *
 * usage: timer-floor [HZ [ROUNDS]]   (default 997 Hz, 7 rounds)
 * The same CPU-bound loop runs, in interleaved rounds, unprofiled and under:
 *   mono        a per-thread CLOCK_MONOTONIC timer (SIGEV_THREAD_ID), empty handler;
 *   cpu         a per-thread CLOCK_THREAD_CPUTIME_ID timer, empty handler (fires
 *               from the kernel's own tick, so at most CONFIG_HZ times a second);
 *   perf        perf_event task-clock sampling at HZ with no signal at all: the
 *               kernel's hrtimer interrupt alone.
 * For each, the median loop's CPU time against unprofiled, and the cost per
 * interrupt. perf counts its interrupts by reading the event's sample count. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { OFF, MONO, CPU, PERF, NKINDS };
static const char *const names[NKINDS] = {"unprofiled", "mono", "cpu", "perf"};

static volatile uint64_t sink;
static volatile sig_atomic_t ticks;

static void on_tick(int sig)
{
	(void)sig;
	ticks++;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void work(uint64_t n)
{
	uint64_t x = sink;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + i;
	sink = x;
}

static int make_timer(clockid_t clk, unsigned hz, timer_t *out)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGRTMIN + 4;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(clk, &sev, out) < 0)
		return -1;
	long ns = 1000000000L / hz;
	struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L},
				 {ns / 1000000000L, ns % 1000000000L}};
	return timer_settime(*out, 0, &its, NULL);
}

/* Task-clock sampling of this thread; overflows are counted by the kernel, never
 * signalled. -1 when perf_event_open is refused. */
static int make_perf(unsigned hz)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = 1000000000u / hz;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned hz = argc > 1 ? (unsigned)atoi(argv[1]) : 997;
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	if (hz < 1 || hz > 100000 || rounds < 1 || rounds > 99) {
		fprintf(stderr, "usage: timer-floor [HZ [ROUNDS]]\n");
		return 2;
	}
	signal(SIGRTMIN + 4, on_tick);
	uint64_t n = 1000000, t0 = cpu_ns();
	work(n);
	n = n * 250000000u / (cpu_ns() - t0 + 1); /* about 250 ms a loop */
	uint64_t ns[NKINDS][99], irq[NKINDS] = {0};
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < NKINDS; k++) {
			timer_t tm;
			int fd = -1, armed = 0;
			if (k == MONO || k == CPU)
				armed = make_timer(k == MONO ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID,
						   hz, &tm) == 0;
			if (k == PERF)
				armed = (fd = make_perf(hz)) >= 0;
			if (k != OFF && !armed) {
				fprintf(stderr, "timer-floor: cannot arm %s\n", names[k]);
				return 1;
			}
			sig_atomic_t t = ticks;
			uint64_t c0 = cpu_ns();
			work(n);
			ns[k][r] = cpu_ns() - c0;
			if (k == MONO || k == CPU) {
				timer_delete(tm);
				irq[k] += (uint64_t)(ticks - t);
			} else if (k == PERF) {
				uint64_t v = 0;
				if (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
					irq[k] += v / (1000000000u / hz);
				close(fd);
			}
		}
	}
	for (int k = 0; k < NKINDS; k++)
		qsort(ns[k], (size_t)rounds, sizeof(uint64_t), cmp);
	double base = (double)ns[OFF][rounds / 2];
	printf("| timer at %u Hz | interrupts/s | loop CPU | cost | us per interrupt |\n", hz);
	printf("|---|---|---|---|---|\n");
	for (int k = 0; k < NKINDS; k++) {
		double med = (double)ns[k][rounds / 2];
		double per_s = k ? (double)irq[k] / rounds / (med / 1e9) : 0;
		double us = per_s > 0 ? (med - base) / 1e3 / (per_s * med / 1e9) : 0;
		printf("| %s | %.0f | %.4f s | %+.2f%% | %.1f |\n", names[k], per_s, med / 1e9,
		       100.0 * (med - base) / base, us);
	}
	printf("\n%d interleaved rounds of about 250 ms of CPU, medians\n", rounds);
	return 0;
}
