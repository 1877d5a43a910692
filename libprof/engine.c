/* engine.c: the profiler's life cycle (create, start, stop, clear, dump, destroy), its
 * metadata (resolvers, notes, dropped counts) and the pause that makes a dump
 * consistent while other threads keep sending events. Control calls run on any thread
 * (in the shim, its control thread), serialised by the profiler lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine-inline.h"
#include "sample-store.h"

static _Atomic uint64_t next_uid = 1;

static int membarrier_cmd(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

/* Registers for the asymmetric fence; returns 0 when writers may skip their fence. */
static int membarrier_setup(void)
{
	int r = membarrier_cmd(MEMBARRIER_CMD_QUERY);
	if (r < 0 || !(r & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return -1;
	return membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 ? 0 : -1;
}

static double epoch_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t coprof__inline_layout(void)
{
	return cp_inline_layout();
}

int coprof_create(const struct coprof_options *opt, struct coprof **out)
{
	if (!out)
		return -EINVAL;
	struct coprof_options o = {0};
	if (opt)
		o = *opt;
	if ((o.clock != COPROF_CLOCK_WALL && o.clock != COPROF_CLOCK_CPU) ||
	    (o.mode != COPROF_MODE_TRACE && o.mode != COPROF_MODE_SAMPLE))
		return -EINVAL;
	if (!o.memory_limit)
		o.memory_limit = CP_DEFAULT_MEMORY_LIMIT;
	if (!o.stall_ns)
		o.stall_ns = CP_DEFAULT_STALL_NS;
	struct coprof *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->opt = o;
	p->fence = membarrier_setup() != 0;
	p->uid = atomic_fetch_add(&next_uid, 1);
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->sample_lock, NULL);
	int rc = cp_samples_new(o.memory_limit, &p->samples);
	if (rc) {
		pthread_mutex_destroy(&p->lock);
		pthread_mutex_destroy(&p->sample_lock);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void ctx_free(struct coprof *p, struct coprof_ctx *c)
{
	atomic_fetch_sub_explicit(&p->mem_used, c->msize, memory_order_relaxed);
	if (c->name != (char *)(c + 1)) /* renamed (coprof_ctx_set_name) */
		free(c->name);
	free(c);
}

void coprof_destroy(struct coprof *p)
{
	if (!p)
		return;
	coprof_stop(p);
	if (coprof_default() == p)
		coprof_set_default(NULL);
	uint64_t self_tid = (uint64_t)gettid();
	struct coprof_thread *t, *tn;
	for (t = p->threads; t; t = tn) {
		tn = t->next;
		/* A clock belongs to its thread; others' clocks are left to the OS. */
		if (!t->exited && !t->fake && t->tid == self_tid) {
			cp_clock_fini(&t->clock);
			if (t->other_on)
				cp_clock_fini(&t->other);
		}
		cp_pool_release(&t->pool);
		struct coprof_ctx *c, *cn;
		for (c = t->ctx_head; c; c = cn) {
			cn = c->next;
			ctx_free(p, c);
		}
		for (c = t->sctx_head; c; c = cn) {
			cn = c->next;
			ctx_free(p, c);
		}
		free(t->ids);
		free(t);
	}
	for (unsigned i = 0; i < p->nnotes; i++)
		free(p->notes[i]);
	free(p->notes);
	free(p->dropped);
	cp_samples_free(p->samples);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->sample_lock);
	free(p);
}

/* Waits until no thread is inside an event section and none can enter one: the
 * state word says CP_PAUSED, and the membarrier (or the writers' fence) guarantees that
 * a writer either saw it or has its odd counter visible here. p->lock is held. */
void cp_pause(struct coprof *p)
{
	atomic_fetch_or(&p->state, CP_PAUSED);
	if (!p->fence && membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
		/* Cannot happen after a successful registration; stay correct anyway. */
		for (struct coprof_thread *t = p->threads; t; t = t->next)
			t->fence = 1;
		p->fence = 1;
		membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	}
	atomic_thread_fence(memory_order_seq_cst);
	for (struct coprof_thread *t = p->threads; t; t = t->next)
		while (atomic_load_explicit(&t->seq, memory_order_acquire) & 1)
			sched_yield();
}

void cp_unpause(struct coprof *p)
{
	atomic_fetch_and_explicit(&p->state, ~CP_PAUSED, memory_order_release);
}

int cp_thread_active(const struct coprof_thread *t, uint32_t state)
{
	return !t->exited && (t->seen & CP_RECORDING) &&
	       (t->seen & ~(CP_RECORDING | CP_PAUSED)) == (state & ~(CP_RECORDING | CP_PAUSED));
}

/* Thread t's clock as the pausing thread sees it now. Its own clock if t is the calling
 * thread; CLOCK_MONOTONIC for others under wall; under cpu another thread's CPU clock
 * cannot be read from here, so its last reading stands (its later CPU time is not in
 * the profile). Inactive threads (stopped, exited, overflowed) are frozen at their
 * last reading. Writers are paused. */
uint64_t cp_thread_now(struct coprof_thread *t, uint64_t self_tid)
{
	struct coprof *p = t->p;
	uint32_t st = atomic_load(&p->state);
	if (!cp_thread_active(t, st) || atomic_load(&p->overflow))
		return t->last;
	uint64_t now;
	if (t->tid == self_tid)
		return cp_now(t);
	if (t->fake)
		now = t->fake(t->fake_arg);
	else if (!t->cpu)
		now = cp_clock_gettime_ns(CLOCK_MONOTONIC); /* every wall implementation is anchored on it */
	else
		now = t->last;
	return now > t->last ? now : t->last;
}

int coprof_start(struct coprof *p)
{
	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (!p->started) {
		p->started = 1;
		if (!p->start_epoch)
			p->start_epoch = epoch_now();
		p->stop_epoch = 0;
		uint32_t st = atomic_load(&p->state);
		uint32_t next = (st & ~(CP_RECORDING | CP_PAUSED)) + CP_GEN_STEP;
		if (!atomic_load(&p->overflow))
			next |= CP_RECORDING;
		atomic_store(&p->state, next);
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int coprof_mark_start(struct coprof *p)
{
	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->started)
		p->start_epoch = epoch_now();
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int coprof_stop(struct coprof *p)
{
	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->started) {
		cp_pause(p);
		uint64_t self_tid = (uint64_t)gettid();
		uint32_t st = atomic_load(&p->state);
		for (struct coprof_thread *t = p->threads; t; t = t->next)
			if (cp_thread_active(t, st))
				cp_thread_end(t, cp_thread_now(t, self_tid));
		atomic_fetch_and(&p->state, ~CP_RECORDING);
		p->started = 0;
		p->stop_epoch = epoch_now();
		cp_unpause(p);
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int coprof_is_running(const struct coprof *p)
{
	return p && (atomic_load(&((struct coprof *)p)->state) & CP_RECORDING) != 0;
}

/* Empties one context; a live context keeps its identity and its place on the thread. */
static void ctx_wipe(struct coprof_ctx *c, uint64_t now)
{
	c->recs = (struct cp_table){0};
	c->edges = (struct cp_table){0};
	c->frames = NULL;
	c->depth = c->cap = c->lost = 0;
	c->resumes = 0;
	c->folded = 0;
	c->fnext = NULL;
	c->begun = c->t->cur == c && !c->is_base;
	c->vbegin = c->begun ? cp_ctx_vnow(c, now) : 0;
	/* Rule 12: a ready task stays ready; the new window counts from its start. */
	c->run_cpu = c->run_wall = c->ready = c->ready_max = 0;
	c->wall_end = 0;
	c->wall_begin = c->begun ? cp_wall_seen(c->t, now) : 0;
}

/* Frees the finished contexts of a list and wipes the others; returns the new tail. */
static struct coprof_ctx *clear_list(struct coprof *p, struct coprof_ctx **pp, uint64_t now)
{
	struct coprof_ctx *c, *tail = NULL;
	while ((c = *pp)) {
		if (c->state == CP_CTX_FINISHED) {
			*pp = c->next;
			ctx_free(p, c);
			continue;
		}
		ctx_wipe(c, now);
		tail = c;
		pp = &c->next;
	}
	return tail;
}

static void clear_thread(struct coprof *p, struct coprof_thread *t, uint64_t now, int active)
{
	if (active)
		t->cur->away = now;
	cp_pool_release(&t->pool);
	memset(t->calls, 0, sizeof(t->calls));
	ctx_wipe(&t->base, now);
	ctx_wipe(&t->agg, now);
	t->ctx_tail = clear_list(p, &t->ctx_head, now);
	t->sctx_tail = clear_list(p, &t->sctx_head, now);
	t->fin_head = t->fin_tail = NULL;
	t->nfin_kept = 0;
	t->nfolded = 0;
	t->ttot = 0;
	t->switches = 0;
	t->lost_depth = 0;
	t->foreign = 0;
	t->stalls = NULL; /* its pool was released */
	t->step_ticks = t->stall_ticks = NULL;
	t->nstalls = 0;
	t->stalls_dropped = 0;
	t->awaits = NULL; /* as the stalls */
	t->await_slots = NULL;
	t->nawaits = t->cawaits = 0;
	t->awaits_dropped = 0;
	t->recorded = 0;
	t->seen = CP_PAUSED; /* a running profiler restarts this thread's run lazily */
}

int coprof_clear(struct coprof *p)
{
	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	cp_pause(p);
	cp_clear_paused(p);
	cp_unpause(p);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void cp_clear_paused(struct coprof *p)
{
	uint64_t self_tid = (uint64_t)gettid();
	uint32_t st = atomic_load(&p->state);
	for (struct coprof_thread *t = p->threads; t; t = t->next)
		clear_thread(p, t, cp_thread_now(t, self_tid), cp_thread_active(t, st));
	pthread_mutex_lock(&p->sample_lock);
	cp_samples_clear(p->samples);
	pthread_mutex_unlock(&p->sample_lock);
	for (unsigned i = 0; i < p->ndropped; i++)
		p->dropped[i].n = 0;
	atomic_store(&p->recorded, 0);
	atomic_store(&p->stepped, 0);
	atomic_store(&p->overflow, 0);
	p->start_epoch = p->started ? epoch_now() : 0;
	p->stop_epoch = 0;
	if (p->started)
		atomic_fetch_or(&p->state, CP_RECORDING);
}

/* coprof_dump, coprof_dump_clear and coprof_dump_fd: a snapshot (with `clear`, taken
 * and cleared in one pause of the writers), then the file, written with no lock held,
 * to `path` or, when path is NULL, to `fd`. */
static int dump(struct coprof *p, const char *path, int fd, int clear)
{
	if (!p || (!path && fd < 0))
		return -EINVAL;
	if (!atomic_load(&p->recorded))
		return COPROF_ENODATA;
	struct cp_profile *prof;
	int rc = cp_snapshot_take(p, clear, &prof);
	if (rc)
		return rc;
	rc = path ? cp_profile_write(prof, path) : cp_profile_write_fd(prof, fd);
	cp_profile_free(prof);
	return rc;
}

int coprof_dump(struct coprof *p, const char *path)
{
	return dump(p, path, -1, 0);
}

int coprof_dump_clear(struct coprof *p, const char *path)
{
	return dump(p, path, -1, 1);
}

int coprof_dump_fd(struct coprof *p, int fd, int clear)
{
	return dump(p, NULL, fd, clear != 0);
}

int coprof_add_resolver(struct coprof *p, coprof_resolve_fn fn, void *arg)
{
	if (!p || !fn)
		return -EINVAL;
	int rc = 0;
	pthread_mutex_lock(&p->lock);
	if (p->nresolvers == CP_MAX_RESOLVERS)
		rc = COPROF_ETOOMANY;
	else
		p->resolvers[p->nresolvers++] = (struct cp_resolver){fn, arg};
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int coprof_set_note(struct coprof *p, const char *note)
{
	if (!p || !note)
		return -EINVAL;
	char *s = strdup(note);
	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	char **n = realloc(p->notes, (p->nnotes + 1) * sizeof(*n));
	if (!n) {
		pthread_mutex_unlock(&p->lock);
		free(s);
		return -ENOMEM;
	}
	n[p->nnotes++] = s;
	p->notes = n;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

void coprof_clock_no_perf(enum coprof_clock kind)
{
	cp_clock_force(kind, kind == COPROF_CLOCK_CPU ? "thread-cputime" : "monotonic");
}

int coprof_replace_note(struct coprof *p, const char *prefix, const char *note)
{
	if (!p || !prefix || !note)
		return -EINVAL;
	char *s = strdup(note);
	if (!s)
		return -ENOMEM;
	size_t len = strlen(prefix);
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->nnotes; i++)
		if (strncmp(p->notes[i], prefix, len) == 0) {
			free(p->notes[i]);
			p->notes[i] = s;
			pthread_mutex_unlock(&p->lock);
			return 0;
		}
	pthread_mutex_unlock(&p->lock);
	free(s);
	return coprof_set_note(p, note);
}

void coprof_count_dropped(struct coprof *p, const char *what, uint64_t n)
{
	if (!p || !what)
		return;
	pthread_mutex_lock(&p->lock);
	unsigned i;
	for (i = 0; i < p->ndropped; i++)
		if (strncmp(p->dropped[i].what, what, sizeof(p->dropped[i].what) - 1) == 0)
			break;
	if (i == p->ndropped) {
		struct cp_dropped *d = realloc(p->dropped, (i + 1) * sizeof(*d));
		if (!d)
			goto out;
		p->dropped = d;
		snprintf(d[i].what, sizeof(d[i].what), "%s", what);
		d[i].n = 0;
		p->ndropped++;
	}
	p->dropped[i].n += n;
out:
	pthread_mutex_unlock(&p->lock);
}

int coprof_overflowed(const struct coprof *p)
{
	return p && atomic_load(&((struct coprof *)p)->overflow);
}

/* The sticky flag: recording stops on every thread at its next event; said once. */
void cp_overflow(struct coprof *p, const char *what)
{
	if (atomic_exchange(&p->overflow, 1))
		return;
	atomic_fetch_and(&p->state, ~CP_RECORDING);
	char msg[160];
	int n = snprintf(msg, sizeof(msg),
			 "coprof: memory limit (%zu KiB) reached in the %s; recording stopped\n",
			 p->opt.memory_limit >> 10, what);
	if (n > 0 && write(2, msg, (size_t)n) < 0)
		return;
}

void coprof_sample(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
		   unsigned depth, uint64_t period_ns, int waiting)
{
	coprof_sample_n(t, c, pcs, depth, period_ns, 1, waiting);
}

void coprof_sample_n(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *pcs,
		     unsigned depth, uint64_t period_ns, uint64_t count, int waiting)
{
	if (!t || !pcs || !depth || !count)
		return;
	struct coprof *p = t->p;
	if (!(atomic_load(&p->state) & CP_RECORDING))
		return;
	pthread_mutex_lock(&p->sample_lock);
	int rc = cp_samples_add(p->samples, t->tid, c, waiting, pcs, depth, period_ns, count);
	pthread_mutex_unlock(&p->sample_lock);
	if (rc == 0)
		atomic_store(&p->recorded, 1);
	else if (rc == -ENOMEM)
		cp_overflow(p, "sample store");
}

void cp_key_unknown(uintptr_t key, char *buf, size_t len)
{
	snprintf(buf, len, "0x%" PRIxPTR, key);
}

/* Codes of the API's own read from the table in coprof.h; any other code is an errno,
 * said as the OS says it, so that ENOSPC reads "No space left on device" wherever it
 * came from. */
const char *coprof_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define CP_ERR_CASE(name, value, text)                                                             \
	case name:                                                                                 \
		return text;
		COPROF_ERRORS(CP_ERR_CASE)
#undef CP_ERR_CASE
	default:
		return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
	}
}
