/* clock-tsc.c: the TSC rate (calibrated once per process against CLOCK_MONOTONIC, or
 * read from the perf page when the kernel publishes it) and the per-thread perf
 * task-clock page whose lock word tells the TSC clocks that their thread was
 * scheduled out. Runs in cp_clock_init, on the thread being set up. */
#define _GNU_SOURCE
#include "clock-tsc.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"

#if CP_CLOCK_HAVE_TSC
#include <cpuid.h>
#endif

#define PAIR_TRIES 16
#define PAIR_MAX_TICKS 20000u /* a (tsc, ns) pair read slower than this is noise */
#define CALIBRATE_NS 1000000u /* each of the two calibration intervals */
#define VERIFY_SLACK_NS 1000u /* allowed error of the rate over the second interval */
#define VERIFY_SLACK_PPM 100u /* ... plus this share of it */
#define CALIBRATE_ATTEMPTS 3

/* The fd is closed as soon as the page is mapped: the mapping keeps the event alive
 * (and attached to this thread) until munmap, and the host never sees a descriptor of
 * ours, so it can neither run out of them because of us nor have us close one of its
 * own later. CLOEXEC covers the moment in between. */
int cp_perf_page_open(void **page)
{
#ifdef SYS_perf_event_open
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_SOFTWARE;
	attr.size = sizeof(attr);
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	/* Counting is not what we want (the lock word is), so ask for the least that
	 * perf_event_paranoid=2 still grants to an unprivileged thread. */
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	long f = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (f < 0)
		return errno ? -errno : -EIO;
	void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, (int)f, 0);
	int err = p == MAP_FAILED ? -errno : 0;
	close((int)f);
	if (err)
		return err;
	*page = p;
	return 0;
#else
	(void)page;
	return -ENOSYS;
#endif
}

void cp_perf_page_close(void *page)
{
	if (page)
		munmap(page, (size_t)sysconf(_SC_PAGESIZE));
}

const volatile uint32_t *cp_perf_page_lock(const void *page)
{
	const struct perf_event_mmap_page *pg = page;
	return &pg->lock;
}

#if CP_CLOCK_HAVE_TSC

/* Constant and nonstop TSC: CPUID 0x80000007, EDX bit 8 ("invariant TSC"), from
 * which Linux derives the constant_tsc and nonstop_tsc flags. */
static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return 0;
	if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
		return 0;
	return (d >> 8) & 1;
}

/* Reads the TSC and CLOCK_MONOTONIC as one instant: the best of several tries, the
 * TSC taken at the midpoint of the two reads around clock_gettime. A pair is only as
 * good as the time between those reads, so a slow best pair (a loaded machine)
 * fails with -EAGAIN. */
static int tsc_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < PAIR_TRIES; i++) {
		uint64_t a = cp_rdtsc();
		uint64_t m = cp_clock_gettime_ns(CLOCK_MONOTONIC);
		uint64_t b = cp_rdtsc();
		if (b >= a && b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = m;
		}
	}
	return best < PAIR_MAX_TICKS ? 0 : -EAGAIN;
}

/* Waits `ns` of CLOCK_MONOTONIC, whatever signals interrupt the sleep. */
static void wait_ns(uint64_t ns)
{
	uint64_t end = cp_clock_gettime_ns(CLOCK_MONOTONIC) + ns;
	for (;;) {
		uint64_t now = cp_clock_gettime_ns(CLOCK_MONOTONIC);
		if (now >= end)
			return;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(end - now)};
		if (end - now >= 1000000000u)
			ts = (struct timespec){.tv_sec = 1, .tv_nsec = 0};
		nanosleep(&ts, NULL);
	}
}

static uint64_t scale(uint64_t ticks, uint64_t mult)
{
	return (uint64_t)(((unsigned __int128)ticks * mult) >> CP_CLOCK_SHIFT);
}

/* The kernel's own TSC-to-ns rate, when it publishes one (cap_user_time: the TSC is
 * its sched_clock). Read under the page's seqcount. Returns 0 when there is none. */
static uint64_t page_mult(const struct perf_event_mmap_page *pg)
{
	uint32_t seq, time_mult, time_shift;
	int cap;
	do {
		seq = pg->lock;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		cap = pg->cap_user_time;
		time_mult = pg->time_mult;
		time_shift = pg->time_shift;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (pg->lock != seq || (seq & 1));
	if (!cap || time_mult == 0 || time_shift > 63)
		return 0;
	if (time_shift <= CP_CLOCK_SHIFT)
		return (uint64_t)time_mult << (CP_CLOCK_SHIFT - time_shift);
	return (uint64_t)time_mult >> (time_shift - CP_CLOCK_SHIFT);
}

/* One attempt: a rate (from the page, or measured over CALIBRATE_NS), then a check
 * that it predicts CLOCK_MONOTONIC over a second interval. */
static int calibrate(const void *page, uint64_t *mult)
{
	uint64_t t0, n0, t1, n1, t2, n2;
	int err = tsc_pair(&t0, &n0);
	if (err)
		return err;
	uint64_t m = page ? page_mult(page) : 0;
	if (m == 0) {
		wait_ns(CALIBRATE_NS);
		if ((err = tsc_pair(&t1, &n1)))
			return err;
		if (t1 <= t0 || n1 <= n0)
			return -ENOTSUP;
		m = (uint64_t)(((unsigned __int128)(n1 - n0) << CP_CLOCK_SHIFT) / (t1 - t0));
	} else {
		t1 = t0;
		n1 = n0;
	}
	/* A TSC between 50 MHz and 20 GHz. */
	if (m < (UINT64_C(1) << CP_CLOCK_SHIFT) / 20 || m > (UINT64_C(20) << CP_CLOCK_SHIFT))
		return -ENOTSUP;
	wait_ns(CALIBRATE_NS);
	if ((err = tsc_pair(&t2, &n2)))
		return err;
	if (t2 <= t1 || n2 <= n1)
		return -ENOTSUP;
	uint64_t predicted = n1 + scale(t2 - t1, m);
	uint64_t error = predicted > n2 ? predicted - n2 : n2 - predicted;
	if (error > VERIFY_SLACK_NS + (n2 - n1) / 1000000u * VERIFY_SLACK_PPM)
		return -EAGAIN;
	*mult = m;
	return 0;
}

#endif

/* The answer, published once: 0 while undecided, UNSOUND, or the rate (which the
 * sanity check in calibrate keeps far from both). */
#define UNSOUND UINT64_C(1)

/* Lock-free on purpose: a thread that forks while another calibrates must not leave
 * its child a held lock. Threads that arrive before the answer is published calibrate
 * on their own; the first to publish wins, and all return what it published. */
int cp_tsc_rate(const void *page, uint64_t *mult)
{
	static uint64_t published;

	uint64_t answer = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
	if (answer == 0) {
		uint64_t mine = UNSOUND;
#if CP_CLOCK_HAVE_TSC
		uint64_t m;
		if (tsc_invariant())
			for (int i = 0; i < CALIBRATE_ATTEMPTS && mine == UNSOUND; i++)
				if (calibrate(page, &m) == 0)
					mine = m;
#else
		(void)page;
#endif
		answer = 0;
		if (__atomic_compare_exchange_n(&published, &answer, mine, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			answer = mine;
	}
	if (answer == UNSOUND)
		return -ENOTSUP;
	*mult = answer;
	return 0;
}
