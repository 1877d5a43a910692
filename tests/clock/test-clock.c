/* test-clock.c: the engine's clocks (libprof/clock.c) against the kernel's: the TSC
 * CPU clock against CLOCK_THREAD_CPUTIME_ID on busy loops, sleeps, blocking reads and
 * oversubscribed threads; the TSC wall clock against CLOCK_MONOTONIC; the fallbacks
 * when perf_event_open is refused. Spans are >= 200 ms and compared as ratios, so the
 * tests hold on a loaded 2-core machine. Each Criterion test runs in its own process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock-tsc.h"
#include "clock.h"

#define MS 1000000u

static uint64_t cputime_ns(void)
{
	return cp_clock_gettime_ns(CLOCK_THREAD_CPUTIME_ID);
}

static uint64_t mono_ns(void)
{
	return cp_clock_gettime_ns(CLOCK_MONOTONIC);
}

/* ns the hypervisor reports it took from every CPU of the machine (the steal column
 * of /proc/stat), in units of USER_HZ; 0 when unreadable. */
static uint64_t steal_ns(void)
{
	unsigned long long f[8] = {0};
	FILE *fp = fopen("/proc/stat", "r");
	if (!fp)
		return 0;
	int n = fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2],
		       &f[3], &f[4], &f[5], &f[6], &f[7]);
	fclose(fp);
	return n == 8 ? f[7] * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK)) : 0;
}

static volatile uint64_t sink;

/* About a microsecond of user-mode arithmetic. */
static void spin(void)
{
	uint64_t x = sink;
	for (int i = 0; i < 400; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	sink = x;
}

/* What a workload saw: the clock under test and the kernel's, over the same span,
 * and how far they disagreed between checkpoints about a millisecond apart. The end
 * values alone would hide errors: every resync re-anchors the clock on the kernel's. */
struct span {
	uint64_t clock;		   /* ns on the clock under test */
	uint64_t cpu;		   /* ns of CLOCK_THREAD_CPUTIME_ID */
	uint64_t wall;		   /* ns of CLOCK_MONOTONIC */
	uint64_t resyncs;	   /* anchors the clock under test took */
	uint64_t reads;		   /* cp_clock_now calls in burn() */
	uint64_t drift;		   /* ns: sum over checkpoints of |clock step - kernel step| */
	uint64_t worst;		   /* ns: the largest of those steps */
	uint64_t steal;		   /* ns the hypervisor reported stolen meanwhile (steal_ns) */
	uint64_t at_clock, at_cpu; /* the last checkpoint */
};

static void span_begin(struct span *s, struct cp_clock *c)
{
	memset(s, 0, sizeof(*s));
	s->wall = mono_ns();
	s->resyncs = c->resyncs;
	s->steal = steal_ns();
	s->at_clock = s->clock = cp_clock_now(c);
	s->at_cpu = s->cpu = cputime_ns();
}

static void checkpoint(struct span *s, struct cp_clock *c)
{
	uint64_t v = cp_clock_now(c), k = cputime_ns();
	uint64_t dv = v - s->at_clock, dk = k - s->at_cpu;
	uint64_t d = dv > dk ? dv - dk : dk - dv;
	s->drift += d;
	if (d > s->worst)
		s->worst = d;
	s->at_clock = v;
	s->at_cpu = k;
}

static void span_end(struct span *s, struct cp_clock *c)
{
	checkpoint(s, c);
	s->clock = s->at_clock - s->clock;
	s->cpu = s->at_cpu - s->cpu;
	s->wall = mono_ns() - s->wall;
	s->resyncs = c->resyncs - s->resyncs;
	s->steal = steal_ns() - s->steal;
}

/* Burns `ns` of this thread's CPU time, reading `c` about every microsecond as an
 * engine under a call-heavy program would, with a checkpoint every millisecond. */
static void burn(struct span *s, struct cp_clock *c, uint64_t ns)
{
	uint64_t end = cputime_ns() + ns;
	do {
		for (int i = 0; i < 1000; i++) {
			spin();
			cp_clock_now(c);
		}
		s->reads += 1000;
		checkpoint(s, c);
	} while (s->at_cpu < end);
}

/* The clock under test agreed with the kernel over the span (within `tolerance`), and
 * at every checkpoint. One step may disagree by up to a resync period: a single hiccup
 * of the host (seen once in CI: 5.7 ms in one run under load) is not the clock
 * drifting, which shows as many small disagreements adding up. Those add up to 0.1-0.4%
 * of the span here; a host loaded far beyond its cores made them 2.3% once (worst step
 * 1.7 ms, end ratio 1.0000), so their bound is twice the end ratio's: a clock that runs
 * a few percent wrong between resyncs still fails it. Time the hypervisor steals runs
 * on the TSC but not on the thread's CPU clock until the next resync (clock.c says so):
 * the steal it reported during the span (all CPUs', in USER_HZ units, so one unit more)
 * is allowed on top, and only then (CI once: 20 ms between checkpoints in 250 ms, in
 * three tests in a row, end ratios 1.0000). */
static int span_ok(const struct span *s, double tolerance)
{
	double ratio = (double)s->clock / (double)s->cpu;
	double drift = (double)(s->drift - s->worst) / (double)s->cpu;
	double stolen = s->steal
			    ? (double)(s->steal + 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK)) /
				  (double)s->cpu
			    : 0;
	return ratio > 1 - tolerance && ratio < 1 + tolerance && drift < 2 * tolerance + stolen &&
	       s->worst < 10 * MS;
}

static void assert_span(const struct span *s, double tolerance, const char *what)
{
	double ratio = (double)s->clock / (double)s->cpu;
	double drift = (double)s->drift / (double)s->cpu;
	cr_log_info("%s: ratio %.5f, drift %.5f (worst step %.3f ms), %llu resyncs, %llu reads, "
		    "%.3f ms stolen",
		    what, ratio, drift, (double)s->worst / MS, (unsigned long long)s->resyncs,
		    (unsigned long long)s->reads, (double)s->steal / MS);
	cr_assert(span_ok(s, tolerance),
		  "%s: clock %.3f ms, kernel %.3f ms (ratio %.4f, allowed 1 +- %.3f), "
		  "disagreeing by %.3f ms between checkpoints (worst step %.3f ms; allowed "
		  "%.3f ms besides it, and 10 ms for it; %.3f ms stolen meanwhile)",
		  what, (double)s->clock / MS, (double)s->cpu / MS, ratio, tolerance,
		  (double)s->drift / MS, (double)s->worst / MS, 2 * tolerance * (double)s->cpu / MS,
		  (double)s->steal / MS);
}

static void assert_within(uint64_t got, uint64_t want, double tolerance, const char *what)
{
	double ratio = (double)got / (double)want;
	cr_assert(ratio > 1 - tolerance && ratio < 1 + tolerance,
		  "%s: clock %.3f ms, kernel %.3f ms (ratio %.4f, allowed 1 +- %.3f)", what,
		  (double)got / MS, (double)want / MS, ratio, tolerance);
}

static void init_forced(struct cp_clock *c, enum coprof_clock kind, const char *name)
{
	cr_assert_eq(cp_clock_force(kind, name), 0);
	cp_clock_init(c, kind);
	cr_assert_str_eq(cp_clock_name(c), name, "wanted %s, got %s (is perf_event_open refused?)",
			 name, cp_clock_name(c));
}

Test(clock, force_rejects_unknown_and_mismatched_names)
{
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_CPU, "monotonic"), -EINVAL);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_CPU, "tsc-wall"), -EINVAL);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_WALL, "tsc-cpu"), -EINVAL);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_WALL, "thread-cputime"), -EINVAL);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_WALL, "rdtsc"), -EINVAL);
	cr_expect_eq(cp_clock_force((enum coprof_clock)7, "monotonic"), -EINVAL);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_WALL, NULL), 0);
	cr_expect_eq(cp_clock_force(COPROF_CLOCK_CPU, "auto"), 0);
}

/* On this machine (invariant TSC, perf allowed) the default is the TSC for both. */
Test(clock, default_is_tsc_for_both_kinds)
{
	struct cp_clock w, c;
	cp_clock_init(&w, COPROF_CLOCK_WALL);
	cp_clock_init(&c, COPROF_CLOCK_CPU);
	cr_expect_str_eq(cp_clock_name(&w), "tsc-wall");
	cr_expect_str_eq(cp_clock_name(&c), "tsc-cpu");
	cp_clock_fini(&w);
	cp_clock_fini(&c);
}

Test(clock, forced_syscall_clocks_match_the_kernel)
{
	struct cp_clock w, c;
	init_forced(&w, COPROF_CLOCK_WALL, "monotonic");
	init_forced(&c, COPROF_CLOCK_CPU, "thread-cputime");
	uint64_t k0 = mono_ns(), w0 = cp_clock_now(&w), k1 = mono_ns();
	cr_expect(w0 >= k0 && w0 <= k1);
	k0 = cputime_ns();
	uint64_t c0 = cp_clock_now(&c);
	k1 = cputime_ns();
	cr_expect(c0 >= k0 && c0 <= k1);
	cp_clock_fini(&w);
	cp_clock_fini(&c);
}

/* The fast path must be the common path: a resync (a syscall) only per reschedule or
 * per span of 10 ms, never per read. */
Test(clock, tsc_cpu_busy_loop_within_2_percent_and_rarely_resyncs)
{
	struct cp_clock c;
	struct span s;
	init_forced(&c, COPROF_CLOCK_CPU, "tsc-cpu");
	span_begin(&s, &c);
	burn(&s, &c, 250 * MS);
	span_end(&s, &c);
	assert_span(&s, 0.02, "busy loop");
	cr_expect_lt(s.resyncs * 100, s.reads, "%llu resyncs for %llu reads",
		     (unsigned long long)s.resyncs, (unsigned long long)s.reads);
	cp_clock_fini(&c);
}

/* An anchor is trusted for `span` ticks only, even on a thread that is never
 * scheduled out; that bounds the error of the rate and keeps d * mult in range. */
Test(clock, anchor_expires_after_its_span)
{
	struct cp_clock c;
	init_forced(&c, COPROF_CLOCK_WALL, "tsc-wall");
	c.span = c.span / 40; /* 4 ms -> 100 us */
	uint64_t before = c.resyncs, end = cputime_ns() + 50 * MS;
	while (cputime_ns() < end) {
		spin();
		cp_clock_now(&c);
	}
	cr_expect_geq(c.resyncs - before, 400, "%llu resyncs in 50 ms of CPU",
		      (unsigned long long)(c.resyncs - before));
	cp_clock_fini(&c);
}

/* Sleeping is not CPU time: half of this span's wall time is spent asleep. */
Test(clock, tsc_cpu_excludes_sleeps)
{
	struct cp_clock c;
	struct span s;
	init_forced(&c, COPROF_CLOCK_CPU, "tsc-cpu");
	span_begin(&s, &c);
	for (int i = 0; i < 100; i++) {
		burn(&s, &c, 2 * MS);
		usleep(2000);
		checkpoint(&s, &c);
	}
	span_end(&s, &c);
	assert_span(&s, 0.02, "busy + sleep");
	cr_expect_lt(s.clock, s.wall * 3 / 4, "sleep counted as CPU time");
	cp_clock_fini(&c);
}

static void *write_slowly(void *arg)
{
	int fd = *(int *)arg;
	for (int i = 0; i < 100; i++) {
		usleep(4000);
		if (write(fd, "x", 1) != 1)
			break;
	}
	return NULL;
}

/* Blocking in read(2) is not CPU time either. */
Test(clock, tsc_cpu_excludes_blocking_reads)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pthread_t writer;
	struct cp_clock c;
	struct span s;
	init_forced(&c, COPROF_CLOCK_CPU, "tsc-cpu");
	span_begin(&s, &c);
	cr_assert_eq(pthread_create(&writer, NULL, write_slowly, &p[1]), 0);
	for (int i = 0; i < 100; i++) {
		char b;
		cr_assert_eq(read(p[0], &b, 1), 1);
		checkpoint(&s, &c);
		burn(&s, &c, 2 * MS);
	}
	span_end(&s, &c);
	pthread_join(writer, NULL);
	assert_span(&s, 0.02, "blocking reads");
	cr_expect_gt(s.wall, s.cpu + 100 * MS, "the reads did not block");
	cp_clock_fini(&c);
	close(p[0]);
	close(p[1]);
}

struct worker {
	struct span s;
	const char *name;
};

static void *busy_worker(void *arg)
{
	struct worker *w = arg;
	struct cp_clock c;
	cp_clock_init(&c, COPROF_CLOCK_CPU);
	w->name = cp_clock_name(&c);
	span_begin(&w->s, &c);
	burn(&w->s, &c, 250 * MS);
	span_end(&w->s, &c);
	cp_clock_fini(&c);
	return NULL;
}

/* Keeps the process on (at most) two CPUs, so three busy threads are oversubscribed
 * and the scheduler preempts them, whatever the machine. */
static void pin_to_two_cpus(void)
{
	cpu_set_t have, want;
	CPU_ZERO(&want);
	cr_assert_eq(sched_getaffinity(0, sizeof(have), &have), 0);
	for (int i = 0, n = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &have)) {
			CPU_SET(i, &want);
			n++;
		}
	cr_assert_eq(sched_setaffinity(0, sizeof(want), &want), 0);
}

Test(clock, tsc_cpu_three_threads_on_two_cores_within_2_percent)
{
	pin_to_two_cpus();
	cr_assert_eq(cp_clock_force(COPROF_CLOCK_CPU, "tsc-cpu"), 0);
	struct worker w[3] = {{.name = NULL}};
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, busy_worker, &w[i]), 0);
	uint64_t waited = 0;
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		cr_assert_str_eq(w[i].name, "tsc-cpu");
		assert_span(&w[i].s, 0.02, "oversubscribed thread");
		waited += w[i].s.wall - w[i].s.cpu;
	}
	/* Three threads share two CPUs: together they waited for one at least a third
	 * of the time, or they were not preempted and this test proved nothing. */
	cr_expect_gt(waited, 200 * MS, "threads waited only %.1f ms", (double)waited / MS);
}

/* Over about a second of mixed sleeping and busy work the TSC wall clock advances
 * as CLOCK_MONOTONIC does, within 0.1%, and never strays from it by more than 50 us
 * at any read. */
Test(clock, tsc_wall_tracks_monotonic_within_0_1_percent)
{
	struct cp_clock w;
	init_forced(&w, COPROF_CLOCK_WALL, "tsc-wall");
	uint64_t m0 = mono_ns(), w0 = cp_clock_now(&w), worst = 0;
	for (int i = 0; i < 50; i++) {
		uint64_t end = mono_ns() + 10 * MS;
		while (mono_ns() < end) {
			spin();
			uint64_t a = mono_ns(), v = cp_clock_now(&w), b = mono_ns();
			uint64_t off = v < a ? a - v : v > b ? v - b : 0;
			if (off > worst)
				worst = off;
		}
		usleep(10000);
	}
	uint64_t w1 = cp_clock_now(&w), m1 = mono_ns();
	cr_log_info("wall: ratio %.6f over %.0f ms, strayed at most %llu ns, %llu resyncs",
		    (double)(w1 - w0) / (double)(m1 - m0), (double)(m1 - m0) / MS,
		    (unsigned long long)worst, (unsigned long long)w.resyncs);
	assert_within(w1 - w0, m1 - m0, 0.001, "wall over sleeps and busy work");
	cr_expect_lt(worst, 50000, "the TSC wall clock strayed %llu ns from CLOCK_MONOTONIC",
		     (unsigned long long)worst);
	cp_clock_fini(&w);
}

/* The TSC and CLOCK_MONOTONIC at one instant: the tightest of several tries, so a
 * preemption between the two reads does not count. */
static void tsc_mono_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 100; i++) {
		uint64_t a = cp_rdtsc(), m = mono_ns(), b = cp_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = m;
		}
	}
}

/* The TSC rate the clocks use predicts CLOCK_MONOTONIC over 300 ms within 0.01%. The
 * clocks would hide a wrong rate (each resync re-anchors them), so check it alone. */
Test(clock, tsc_rate_matches_monotonic)
{
	uint64_t mult;
	cr_assert_eq(cp_tsc_rate(NULL, &mult), 0);
	uint64_t t0, m0, t1, m1;
	tsc_mono_pair(&t0, &m0);
	usleep(300000);
	tsc_mono_pair(&t1, &m1);
	uint64_t predicted = (uint64_t)(((unsigned __int128)(t1 - t0) * mult) >> CP_CLOCK_SHIFT);
	assert_within(predicted, m1 - m0, 0.0001, "TSC ticks scaled by the rate");
}

/* A perf page as a kernel whose sched_clock is the TSC fills it (cap_user_time), with
 * the rate `ns_per_tick` as time_mult / 2^time_shift. */
static void fake_page(struct perf_event_mmap_page *pg, double ns_per_tick)
{
	memset(pg, 0, sizeof(*pg));
	pg->cap_user_time = 1;
	pg->time_shift = 20;
	pg->time_mult = (uint32_t)(ns_per_tick * (1 << 20));
}

/* The TSC's rate in ns per tick, measured over 200 ms. */
static double measured_rate(void)
{
	uint64_t t0, m0, t1, m1;
	tsc_mono_pair(&t0, &m0);
	usleep(200000);
	tsc_mono_pair(&t1, &m1);
	return (double)(m1 - m0) / (double)(t1 - t0);
}

/* When the kernel publishes the TSC rate in the perf page, that rate is used... */
Test(clock, tsc_rate_comes_from_the_perf_page_when_published)
{
	struct perf_event_mmap_page pg;
	double rate = measured_rate();
	fake_page(&pg, rate);
	uint64_t mult;
	cr_assert_eq(cp_tsc_rate(&pg, &mult), 0);
	uint64_t want = (uint64_t)pg.time_mult << (CP_CLOCK_SHIFT - pg.time_shift);
	cr_expect_eq(mult, want, "mult %llu, page says %llu", (unsigned long long)mult,
		     (unsigned long long)want);
}

/* ... but only once checked against CLOCK_MONOTONIC: a wrong one makes the TSC
 * unsound for the process. */
Test(clock, tsc_rate_from_the_perf_page_is_checked)
{
	struct perf_event_mmap_page pg;
	fake_page(&pg, measured_rate() * 1.01);
	uint64_t mult;
	cr_expect_eq(cp_tsc_rate(&pg, &mult), -ENOTSUP);
	struct cp_clock c;
	cp_clock_init(&c, COPROF_CLOCK_CPU);
	cr_expect_str_eq(cp_clock_name(&c), "thread-cputime");
	cp_clock_fini(&c);
}

static void *ask_rate(void *arg)
{
	uint64_t *mult = arg;
	if (cp_tsc_rate(NULL, mult) != 0)
		*mult = 0;
	return NULL;
}

/* Threads that ask for the rate before anyone has it each calibrate, and all end up
 * with the one answer published first. */
Test(clock, concurrent_first_calibrations_agree)
{
	uint64_t mult[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, ask_rate, &mult[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_neq(mult[0], 0);
	for (int i = 1; i < 4; i++)
		cr_expect_eq(mult[i], mult[0]);
}

Test(clock, now_never_goes_backwards)
{
	struct cp_clock w, c;
	cp_clock_init(&w, COPROF_CLOCK_WALL);
	cp_clock_init(&c, COPROF_CLOCK_CPU);
	uint64_t pw = cp_clock_now(&w), pc = cp_clock_now(&c);
	for (int i = 0; i < 100000; i++) {
		uint64_t vw = cp_clock_now(&w), vc = cp_clock_now(&c);
		cr_assert_geq(vw, pw);
		cr_assert_geq(vc, pc);
		pw = vw;
		pc = vc;
		if (i % 10000 == 0)
			usleep(100);
	}
	cp_clock_fini(&w);
	cp_clock_fini(&c);
}

/* Makes perf_event_open fail with `err` in this process, as a kernel with a stricter
 * perf_event_paranoid (EACCES), no perf support (ENOENT, ENOSYS) or a seccomp policy
 * would. */
static void refuse_perf(int err)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

static void assert_falls_back(int err)
{
	refuse_perf(err);
	struct cp_clock w, c;
	cr_assert_eq(cp_clock_force(COPROF_CLOCK_CPU, "tsc-cpu"), 0);
	cp_clock_init(&w, COPROF_CLOCK_WALL);
	cp_clock_init(&c, COPROF_CLOCK_CPU);
	cr_expect_str_eq(cp_clock_name(&w), "monotonic");
	cr_expect_str_eq(cp_clock_name(&c), "thread-cputime");
	cr_expect_null(c.page);
	struct span s;
	span_begin(&s, &c);
	burn(&s, &c, 20 * MS);
	span_end(&s, &c);
	assert_span(&s, 0.02, "fallback");
	cp_clock_fini(&w);
	cp_clock_fini(&c);
}

Test(clock, falls_back_when_perf_gives_eacces)
{
	assert_falls_back(EACCES);
}

Test(clock, falls_back_when_perf_gives_enoent)
{
	assert_falls_back(ENOENT);
}

Test(clock, falls_back_when_perf_gives_enosys)
{
	assert_falls_back(ENOSYS);
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The perf event lives in its mapping: the host never sees a descriptor of ours. */
Test(clock, holds_no_file_descriptor)
{
	int before = count_fds();
	struct cp_clock c[8];
	for (int i = 0; i < 8; i++)
		init_forced(&c[i], COPROF_CLOCK_CPU, "tsc-cpu");
	cr_expect_eq(count_fds(), before);
	for (int i = 0; i < 8; i++)
		cp_clock_fini(&c[i]);
	cr_expect_eq(count_fds(), before);
}

/* After fini the clock still answers, through the syscall, never backwards. */
Test(clock, fini_degrades_to_the_syscall)
{
	struct cp_clock c;
	init_forced(&c, COPROF_CLOCK_CPU, "tsc-cpu");
	uint64_t before = cp_clock_now(&c);
	cp_clock_fini(&c);
	cr_expect_str_eq(cp_clock_name(&c), "thread-cputime");
	cr_expect_geq(cp_clock_now(&c), before);
}

/* A forked child re-initialises its clock (as the shim does after fork) and gets a
 * perf event of its own, which then times the child correctly. */
Test(clock, forked_child_reinitialises)
{
	struct cp_clock c;
	init_forced(&c, COPROF_CLOCK_CPU, "tsc-cpu");
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		cp_clock_fini(&c);
		cp_clock_init(&c, COPROF_CLOCK_CPU);
		struct span s;
		span_begin(&s, &c);
		for (int i = 0; i < 10; i++) {
			burn(&s, &c, 20 * MS);
			usleep(10000);
		}
		span_end(&s, &c);
		int ok = strcmp(cp_clock_name(&c), "tsc-cpu") == 0 && span_ok(&s, 0.02);
		_exit(ok ? 0 : 1);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cp_clock_fini(&c);
}

/* A child made by clone() without fork's handlers reads the clock its parent set up:
 * the perf page is not mapped there (VM_DONTCOPY), so the clock must notice before
 * reading it, fall back to clock_gettime and say so; a clock the child sets up is its
 * own TSC clock again, and the parent's clock stays as it was. Exit codes say which
 * check failed (a SIGSEGV is the bug itself). */
static void clone_child_reads(enum coprof_clock kind, const char *tsc, const char *syscall_name)
{
	struct cp_clock c;
	init_forced(&c, kind, tsc);
	uint64_t before = cp_clock_now(&c);
	pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		uint64_t v = cp_clock_now(&c);
		if (!c.orphan || strcmp(cp_clock_name(&c), syscall_name) != 0)
			_exit(2);
		if (v < before || cp_clock_now(&c) < v)
			_exit(3);
		cp_clock_fini(&c); /* unmaps nothing: the address is not the child's page */
		struct cp_clock own;
		cp_clock_init(&own, kind);
		if (own.orphan || strcmp(cp_clock_name(&own), tsc) != 0 || cp_clock_now(&own) == 0)
			_exit(4);
		cp_clock_fini(&own);
		_exit(0);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d",
		  WIFEXITED(status) ? "exit" : "signal",
		  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	cr_expect(!c.orphan);
	cr_expect_str_eq(cp_clock_name(&c), tsc);
	cr_expect_geq(cp_clock_now(&c), before);
	cp_clock_fini(&c);
}

Test(clock, clone_child_falls_back_from_the_parents_cpu_clock)
{
	clone_child_reads(COPROF_CLOCK_CPU, "tsc-cpu", "thread-cputime");
}

Test(clock, clone_child_falls_back_from_the_parents_wall_clock)
{
	clone_child_reads(COPROF_CLOCK_WALL, "tsc-wall", "monotonic");
}
