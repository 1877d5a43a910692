/* clock.c: chooses a clock implementation per thread and re-anchors the TSC clocks
 * (see clock.h). Runs on the thread that owns the clock; cp_clock_force from any
 * thread, before the clocks it affects are initialised. */
#include "clock.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock-tsc.h"

/* How long an anchor is trusted while the thread keeps running: it bounds the drift
 * of a TSC rate error, and time the CPU clock counts that the kernel does not (IRQ
 * time, a hypervisor's steal time). A resync costs one clock_gettime. */
#define SPAN_WALL_NS 4000000u
#define SPAN_CPU_NS 10000000u

static const char *const impl_names[CP_CLOCK_N_IMPL] = {
    [CP_CLOCK_TSC_CPU] = "tsc-cpu",
    [CP_CLOCK_TSC_WALL] = "tsc-wall",
    [CP_CLOCK_MONOTONIC] = "monotonic",
    [CP_CLOCK_CPUTIME] = "thread-cputime",
};

/* Per clock kind: the forced implementation, or -1 to choose. */
static int forced[2] = {-1, -1};

/* The process's word (clock.h): 1 in a page of its own that the kernel zeroes in a
 * child made without CLONE_VM. The first clock set up in a process where the word
 * reads 0 (none yet, or the page was its parent's) maps a new one, so the clocks of
 * each process point at a page whose word only that process sees nonzero. Where
 * the kernel has no MADV_WIPEONFORK (before 4.14) the word is one nothing zeroes,
 * and a child made by clone() must not read its parent's TSC clocks. */
static const volatile uint32_t *proc_word;
static const uint32_t never_wiped = 1;

static const volatile uint32_t *process_word(void)
{
	const volatile uint32_t *w = __atomic_load_n(&proc_word, __ATOMIC_ACQUIRE);
	if (w && *w)
		return w;
	size_t size = (size_t)sysconf(_SC_PAGESIZE);
	const volatile uint32_t *mine = &never_wiped;
	uint32_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
#ifdef MADV_WIPEONFORK
		if (madvise(p, size, MADV_WIPEONFORK) == 0) {
			*p = 1;
			mine = p;
		} else
#endif
			munmap(p, size);
	}
	if (__atomic_compare_exchange_n(&proc_word, &w, mine, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return mine;
	if (mine != &never_wiped) /* another thread of this process mapped one first */
		munmap((void *)mine, size);
	return w;
}

static int impl_is_cpu(enum cp_clock_impl impl)
{
	return impl == CP_CLOCK_TSC_CPU || impl == CP_CLOCK_CPUTIME;
}

int cp_clock_force(enum coprof_clock kind, const char *name)
{
	if (kind != COPROF_CLOCK_WALL && kind != COPROF_CLOCK_CPU)
		return -EINVAL;
	int impl = -1;
	if (name && strcmp(name, "auto") != 0) {
		for (int i = 0; i < CP_CLOCK_N_IMPL; i++)
			if (strcmp(name, impl_names[i]) == 0)
				impl = i;
		if (impl < 0 || impl_is_cpu(impl) != (kind == COPROF_CLOCK_CPU))
			return -EINVAL;
	}
	__atomic_store_n(&forced[kind], impl, __ATOMIC_RELAXED);
	return 0;
}

/* Sets up a TSC clock on the calling thread. Returns 0, or -errno when the TSC is
 * unsound or perf refuses the thread its page; `c` is then left for the caller's
 * fallback, with nothing open. */
static int tsc_init(struct cp_clock *c, enum cp_clock_impl impl)
{
	int err = cp_perf_page_open(&c->page);
	if (err)
		return err;
	uint64_t mult;
	if ((err = cp_tsc_rate(c->page, &mult))) {
		cp_perf_page_close(c->page);
		c->page = NULL;
		return err;
	}
	uint64_t span_ns = impl == CP_CLOCK_TSC_CPU ? SPAN_CPU_NS : SPAN_WALL_NS;
	c->proc_word = process_word();
	c->impl = impl;
	c->mult = mult;
	c->span = (uint64_t)(((unsigned __int128)span_ns << CP_CLOCK_SHIFT) / mult);
	c->seq_word = cp_perf_page_lock(c->page);
	c->last = cp_clock_resync(c);
	return 0;
}

void cp_clock_init(struct cp_clock *c, enum coprof_clock kind)
{
	memset(c, 0, sizeof(*c));
	int cpu = kind == COPROF_CLOCK_CPU;
	int want = __atomic_load_n(&forced[cpu], __ATOMIC_RELAXED);
	enum cp_clock_impl tsc = cpu ? CP_CLOCK_TSC_CPU : CP_CLOCK_TSC_WALL;
	if ((want < 0 || want == (int)tsc) && tsc_init(c, tsc) == 0)
		return;
	c->impl = cpu ? CP_CLOCK_CPUTIME : CP_CLOCK_MONOTONIC;
}

/* The clock_gettime implementation that measures what TSC implementation `impl`
 * does. */
static enum cp_clock_impl fallback(enum cp_clock_impl impl)
{
	return impl == CP_CLOCK_TSC_CPU ? CP_CLOCK_CPUTIME : CP_CLOCK_MONOTONIC;
}

/* A clock of another process is not unmapped: its page is not mapped in this one,
 * and something of the program's may have been mapped at that address since. */
void cp_clock_fini(struct cp_clock *c)
{
	if (c->page && *c->proc_word)
		cp_perf_page_close(c->page);
	c->page = NULL;
	if (c->impl <= CP_CLOCK_TSC_WALL)
		c->impl = fallback(c->impl);
}

const char *cp_clock_name(const struct cp_clock *c)
{
	return (unsigned)c->impl < CP_CLOCK_N_IMPL ? impl_names[c->impl] : "?";
}

/* The anchor pairs the reference clock with the TSC at the midpoint of the reads
 * around it. The lock word is read first: a reschedule anywhere after that read,
 * including between the reference clock and the TSC, shows on the next
 * cp_clock_now as a changed word, and that anchor is never used. */
uint64_t cp_clock_resync(struct cp_clock *c)
{
#if CP_CLOCK_HAVE_TSC
	if (!*c->proc_word) {
		c->page = NULL;
		c->impl = fallback(c->impl);
		c->orphan = 1;
		return cp_clock_gettime_ns(c->impl == CP_CLOCK_CPUTIME ? CLOCK_THREAD_CPUTIME_ID
								       : CLOCK_MONOTONIC);
	}
	uint32_t seq = *c->seq_word;
	uint64_t a = cp_rdtsc();
	uint64_t ns = cp_clock_gettime_ns(c->impl == CP_CLOCK_TSC_CPU ? CLOCK_THREAD_CPUTIME_ID
								      : CLOCK_MONOTONIC);
	uint64_t b = cp_rdtsc();
	c->seq = seq;
	c->tsc0 = a + (b - a) / 2;
	c->ns0 = ns;
	c->resyncs++;
	return ns;
#else
	return cp_clock_gettime_ns(CLOCK_MONOTONIC);
#endif
}
