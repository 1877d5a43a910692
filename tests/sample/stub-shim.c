/* stub-shim.c: just enough of the shim and the engine for the sampler core
 * (preload/sampler*.c) to run inside a test program, built together into one small
 * shared library. coprof_sample, called on the sampler's folding thread, records what
 * it gets; the test reads it back through the stub_* functions (exported). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/service.h"
#include "stub-shim.h"

#include "sampler.h"
#include "signal-safe.h"
#include "state/state.h"

struct pl_config pl_cfg;
struct coprof *pl_prof;

static __thread struct pl_tls tls __attribute__((tls_model("initial-exec")));
static __thread int thread_no __attribute__((tls_model("initial-exec")));
static int next_thread_no;
static const struct pl_runtime *runtime;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct stub_sample *samples;
static size_t nsamples, capsamples;
static uint64_t dropped;
static char note[256];

struct pl_tls *pl_tls(void)
{
	return &tls;
}

/* Engine threads are small integers cast to pointers: 1 for the first thread. */
struct coprof_thread *pl_thread(void)
{
	if (!thread_no)
		thread_no = __atomic_add_fetch(&next_thread_no, 1, __ATOMIC_RELAXED);
	return (struct coprof_thread *)(uintptr_t)thread_no;
}

void pl_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("coprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The sampler's tests install no seccomp filter. */
int pl_seccomp_filtered(void)
{
	return 0;
}

void pl_runtime_add(const struct pl_runtime *rt)
{
	runtime = rt;
}

void coprof_sample(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
		   unsigned depth, uint64_t period_ns, int waiting)
{
	pthread_mutex_lock(&lock);
	if (nsamples == capsamples) {
		capsamples = capsamples ? capsamples * 2 : 4096;
		samples = realloc(samples, capsamples * sizeof(*samples));
	}
	struct stub_sample *s = &samples[nsamples++];
	memset(s, 0, sizeof(*s));
	s->thread = (int)(uintptr_t)t;
	s->ctx = c;
	s->depth = depth;
	s->ns = period_ns;
	s->waiting = waiting;
	memcpy(s->pcs, pcs, (depth < STUB_DEPTH ? depth : STUB_DEPTH) * sizeof(*pcs));
	pthread_mutex_unlock(&lock);
}

void coprof_sample_n(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
		     unsigned depth, uint64_t period_ns, uint64_t count, int waiting)
{
	for (uint64_t k = 0; k < count; k++) /* the tests read single samples */
		coprof_sample(t, c, pcs, depth, period_ns, waiting);
}

void coprof_step_tick(struct coprof_thread *t, const uintptr_t *pcs, unsigned depth)
{
	(void)t, (void)pcs, (void)depth; /* steps are the engine's: test-stalls.c */
}

void coprof_count_dropped(struct coprof *p, const char *what, uint64_t n)
{
	(void)p;
	(void)what;
	__atomic_add_fetch(&dropped, n, __ATOMIC_RELAXED);
}

void coprof_clock_no_perf(enum coprof_clock kind)
{
	(void)kind;
}

int coprof_set_note(struct coprof *p, const char *n)
{
	(void)p;
	snprintf(note, sizeof(note), "%s", n);
	return 0;
}

int stub_init(int wall, unsigned hz)
{
	static int dummy;
	pl_cfg.mode = COPROF_MODE_SAMPLE;
	pl_cfg.clock = wall ? COPROF_CLOCK_WALL : COPROF_CLOCK_CPU;
	pl_cfg.hz = hz;
	pl_cfg.signo = SIGUSR2;
	pl_prof = (struct coprof *)&dummy;
	return pl_sampler_init();
}

void stub_start(void)
{
	runtime->start();
}

void stub_stop(void)
{
	runtime->stop();
}

void stub_thread_start(void)
{
	pl_thread();
	runtime->thread_start();
}

void stub_thread_exit(void)
{
	runtime->thread_exit();
}

struct coprof_ctx *pl_stack_at_tick(uintptr_t sp, struct coprof_ctx *cur)
{
	(void)sp;
	return cur; /* no stack adapter here: the switch hooks say where the thread is */
}

/* No stack adapter: no sample is on a stack the fold must find (rec->sp stays 0). */
struct coprof_ctx *pl_stack_fold(struct pl_sthread *st, const struct pl_rec *rec, uint32_t depth)
{
	(void)st;
	(void)depth;
	return rec->ctx;
}

void pl_stack_fold_free(struct pl_sthread *st)
{
	(void)st;
}

void pl_stack_fold_name(const struct pl_rec *rec, uint32_t depth)
{
	(void)rec;
	(void)depth;
}

struct pl_stack *pl_stack_unnamed(const struct coprof_ctx *ctx, uintptr_t sp)
{
	(void)ctx;
	(void)sp;
	return NULL;
}

int pl_stack_hooked(void)
{
	return 1; /* as if hooks followed the stacks: the handler never walks for the fold */
}

void stub_switch(void *from, void *to)
{
	tls.in_switch = 1;
	pl_sampler_switch(from, to);
}

void stub_switch_done(void)
{
	tls.in_switch = 0;
}

void stub_finish(void *ctx)
{
	pl_sampler_finish(ctx);
}

size_t stub_samples(const struct stub_sample **out)
{
	*out = samples;
	return nsamples;
}

uint64_t stub_dropped(void)
{
	return dropped;
}

const char *stub_note(void)
{
	return note;
}

int stub_signo(void)
{
	return pl_sconf.signo;
}

int stub_cpu_timer(void)
{
	return pl_sconf.cpu_timer;
}

int stub_perf(void)
{
	return pl_sconf.perf;
}

int stub_unw_walk(const ucontext_t *uc, uintptr_t *pcs, int max, uintptr_t *base)
{
	return pl_unw_walk(pl_tls(), uc, pcs, max, base);
}

void stub_force_timer(int on)
{
	pl_sampler_force_timer = on;
}

/* The signal guard (signal-guard.c) is the shim's: here signals are the test's. */
int pl_sig_guard(int signo, const struct sigaction *prog, int ign_is_view, void (*lost)(int))
{
	(void)signo, (void)prog, (void)ign_is_view, (void)lost;
	return 0;
}

int pl_sig_prog_action(int signo, struct sigaction *out)
{
	(void)signo;
	(void)out;
	return -1; /* no guard here: the sampler forwards by what it replaced */
}

int pl_sig_prog_defer(int signo)
{
	(void)signo;
	return 0;
}

int pl_sig_real_action(int signo, const struct sigaction *act, struct sigaction *oact)
{
	return sigaction(signo, act, oact);
}

void pl_sig_block_all(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
}

void pl_sig_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

void pl_sig_raw_masks_from(uintptr_t lo, uintptr_t hi)
{
	(void)lo, (void)hi;
}

/* libunwind's pipe is the shim's concern (fd.c): here nothing takes it. */
int pl_fd_unw_pipe_safe(void)
{
	return 1;
}
