/* engine-ctx.c: threads and contexts. Registration, context creation, switches and
 * finishes move the virtual clocks (DESIGN rules 4, 5, 8, 9) and keep the task and
 * thread tables. Every function here runs on the thread concerned, inside an event
 * section where it touches that thread's data; names are guarded by the profiler lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine-inline.h"

static void ctx_init(struct coprof_thread *t, struct coprof_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->t = t;
}

int coprof_thread_register(struct coprof *p, const char *name, struct coprof_thread **out)
{
	if (!p || !out)
		return -EINVAL;
	struct coprof_thread *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	atomic_store_explicit(&t->seq, 0, memory_order_relaxed);
	t->seen = CP_PAUSED; /* never equal to a state word a writer acts on */
	t->p = p;
	t->fake = p->opt.fake_clock;
	t->fake_arg = p->opt.fake_clock_arg;
	t->cpu = p->opt.clock == COPROF_CLOCK_CPU;
	t->fence = p->fence;
	cp_pool_init(&t->pool, &p->mem_used, p->opt.memory_limit);
	ctx_init(t, &t->base);
	t->base.is_base = 1;
	t->base.state = CP_CTX_RUNNING;
	ctx_init(t, &t->agg);
	t->agg.is_agg = 1;
	t->agg.state = CP_CTX_FINISHED;
	t->cur = &t->base;
	t->step_long = UINT64_MAX;
	t->tid = (uint64_t)gettid();
	if (!t->fake)
		cp_clock_init(&t->clock, p->opt.clock);
	if (name)
		snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_lock(&p->lock);
	struct coprof_thread **pp = &p->threads;
	while (*pp)
		pp = &(*pp)->next;
	*pp = t;
	pthread_mutex_unlock(&p->lock);
	*out = t;
	return 0;
}

/* Closes every stack of the thread at its clock now and freezes its clocks, so the
 * thread's data stays in the profile after the thread is gone. */
void coprof_thread_exit(struct coprof_thread *t)
{
	if (!t || t->exited)
		return;
	uint32_t st = cp_section_open(t);
	if (cp_thread_active(t, st))
		cp_thread_end(t, cp_now(t));
	t->seen = CP_PAUSED;
	t->exited = 1;
	cp_section_close(t);
	if (!t->fake)
		cp_clock_fini(&t->clock);
	if (t->other_on)
		cp_clock_fini(&t->other);
}

int coprof_thread_set_name(struct coprof_thread *t, const char *name)
{
	if (!t || !name)
		return -EINVAL;
	pthread_mutex_lock(&t->p->lock);
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_unlock(&t->p->lock);
	return 0;
}

/* A new context of t, suspended, in no list yet: one allocation, its name after it. */
static int ctx_new(struct coprof_thread *t, uint64_t id, const char *name, const char *runtime,
		   struct coprof_ctx **out)
{
	if (!t || !out)
		return -EINVAL;
	struct coprof *p = t->p;
	size_t nlen = name ? strlen(name) + 1 : 0;
	size_t size = sizeof(struct coprof_ctx) + nlen;
	if (size > UINT32_MAX)
		return -ENOMEM;
	size_t before = atomic_fetch_add_explicit(&p->mem_used, size, memory_order_relaxed);
	if (before + size > p->opt.memory_limit) {
		atomic_fetch_sub_explicit(&p->mem_used, size, memory_order_relaxed);
		cp_overflow(p, "context table");
		return -ENOMEM;
	}
	struct coprof_ctx *c = malloc(size);
	if (!c) {
		atomic_fetch_sub_explicit(&p->mem_used, size, memory_order_relaxed);
		return -ENOMEM;
	}
	ctx_init(t, c);
	if (nlen) {
		c->name = (char *)(c + 1);
		memcpy(c->name, name, nlen);
	}
	c->id = id;
	c->msize = (uint32_t)size;
	if (runtime) {
		size_t rlen = strnlen(runtime, sizeof(c->runtime) - 1);
		memcpy(c->runtime, runtime, rlen); /* ctx_init zeroed the rest */
	}
	c->state = CP_CTX_SUSPENDED;
	*out = c;
	return 0;
}

int coprof_ctx_create(struct coprof_thread *t, uint64_t id, const char *name, const char *runtime,
		      struct coprof_ctx **out)
{
	struct coprof_ctx *c;
	int rc = ctx_new(t, id, name, runtime, &c);
	if (rc)
		return rc;
	cp_section_open(t);
	if (t->ctx_tail)
		t->ctx_tail->next = c;
	else
		t->ctx_head = c;
	t->ctx_tail = c;
	cp_section_close(t);
	*out = c;
	return 0;
}

/* The dumper reads t's lists with p->lock held (and clear changes them then): the sampled
 * list is only ever changed under that lock, so t's own events need not know of it. */
int coprof_ctx_create_sampled(struct coprof_thread *t, uint64_t id, const char *name,
			      const char *runtime, struct coprof_ctx **out)
{
	struct coprof_ctx *c;
	int rc = ctx_new(t, id, name, runtime, &c);
	if (rc)
		return rc;
	pthread_mutex_lock(&t->p->lock);
	if (t->sctx_tail)
		t->sctx_tail->next = c;
	else
		t->sctx_head = c;
	t->sctx_tail = c;
	pthread_mutex_unlock(&t->p->lock);
	*out = c;
	return 0;
}

void coprof_ctx_finish_sampled(struct coprof_ctx *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->t->p->lock);
	c->state = CP_CTX_FINISHED;
	pthread_mutex_unlock(&c->t->p->lock);
}

int coprof_ctx_set_name(struct coprof_ctx *c, const char *name)
{
	if (!c || !name)
		return -EINVAL;
	char *nm = strdup(name);
	if (!nm)
		return -ENOMEM;
	pthread_mutex_lock(&c->t->p->lock);
	char *old = c->name;
	c->name = nm;
	pthread_mutex_unlock(&c->t->p->lock);
	if (old != (char *)(c + 1)) /* not the one made with the context */
		free(old);
	return 0;
}

struct coprof_ctx *coprof_ctx_current(const struct coprof_thread *t)
{
	if (!t || t->cur == &t->base)
		return NULL;
	return t->cur;
}

/* --- rule 12: each task's run on both clocks, and the time it sat ready ----------- */

/* Both clocks of the calling thread t when its own clock reads `now`. */
struct both {
	uint64_t cpu, wall;
};

/* The clock of the other kind now, set up at its first use (a perf page, as the
 * thread's own clock). A fake clock stands for both. */
static uint64_t other_now(struct coprof_thread *t, uint64_t now)
{
	if (t->fake)
		return t->other_last = now;
	if (!t->other_on) {
		cp_clock_init(&t->other, t->cpu ? COPROF_CLOCK_WALL : COPROF_CLOCK_CPU);
		t->other_on = 1;
	}
	return t->other_last = cp_clock_now(&t->other);
}

static struct both both_now(struct coprof_thread *t, uint64_t now)
{
	uint64_t o = other_now(t, now);
	return t->cpu ? (struct both){now, o} : (struct both){o, now};
}

/* Another thread's view (cp_thread_now's `now`): its wall clock is CLOCK_MONOTONIC,
 * which any thread reads; its CPU clock is not, and stands at its last reading. */
static struct both both_seen(const struct coprof_thread *t, uint64_t now)
{
	if (t->fake)
		return (struct both){now, now};
	if (t->cpu)
		return (struct both){now, cp_clock_gettime_ns(CLOCK_MONOTONIC)};
	return (struct both){t->other_last, now};
}

uint64_t cp_wall_seen(struct coprof_thread *t, uint64_t now)
{
	return t->fake || !t->cpu ? now : cp_clock_gettime_ns(CLOCK_MONOTONIC);
}

/* The running task c's step so far, at readings b, into its run times. */
static void run_add(struct coprof_thread *t, struct coprof_ctx *c, struct both b)
{
	if (b.cpu > t->in_cpu)
		c->run_cpu += b.cpu - t->in_cpu;
	if (b.wall > t->in_wall)
		c->run_wall += b.wall - t->in_wall;
	c->wall_away = b.wall;
}

/* Where c's ready time counts from: when it became ready, or when this recording run
 * began, if later. */
static uint64_t ready_from(const struct coprof_thread *t, const struct coprof_ctx *c)
{
	return c->ready_at > t->rec_wall ? c->ready_at : t->rec_wall;
}

/* c, ready, runs or ends at wall clock `wall`: its ready interval closes. */
static void ready_end(struct coprof_thread *t, struct coprof_ctx *c, uint64_t wall, int ran)
{
	if (!c->is_ready)
		return;
	c->is_ready = 0;
	t->nready--;
	if (!ran)
		return;
	uint64_t from = ready_from(t, c);
	uint64_t d = wall > from ? wall - from : 0;
	c->ready += d;
	if (d > c->ready_max)
		c->ready_max = d;
	if (!c->begun)
		c->wall_begin = from; /* its life in the window began when it could run */
}

/* A task made ready at `since` was waiting behind the stall kept last, if that stall
 * ended later and no longer stall came between (it would have been kept or dropped). */
static void count_behind(struct coprof_thread *t, uint64_t since)
{
	if (!t->stalls || t->last_stall >= t->nstalls || since >= t->last_stall_wall)
		return;
	struct cp_stall_rec *s = &t->stalls[t->last_stall];
	if (s->gen == t->stall_gen && s->behind != UINT32_MAX)
		s->behind++;
}

void cp_task_run_begin(struct coprof_thread *t, uint64_t now)
{
	if (t->cur->is_base) {
		/* The wall clock only where it costs nothing more (a task switch sets it
		 * up): under cpu, a thread that never switched has no ready tasks. */
		if (!t->cpu || t->fake || t->other_on)
			t->rec_wall = t->cpu ? other_now(t, now) : now;
		return;
	}
	struct both b = both_now(t, now);
	t->rec_wall = b.wall;
	t->in_cpu = b.cpu;
	t->in_wall = b.wall;
}

void cp_task_run_end(struct coprof_thread *t, uint64_t now)
{
	if (!t->cur->is_base)
		run_add(t, t->cur, t->tid == (uint64_t)gettid() ? both_now(t, now) : both_seen(t, now));
}

void coprof_ctx_ready(struct coprof_thread *t, struct coprof_ctx *c, uint64_t since)
{
	if (!t || !c)
		return;
	uint32_t st = cp_section_open(t);
	t->ready_seen = 1;
	if (c->t != t || c == t->cur || c->is_base || c->state != CP_CTX_SUSPENDED || c->is_ready)
		goto out;
	if (st != t->seen && !cp_thread_begin(t, st))
		goto out;
	uint64_t now = cp_now(t);
	uint64_t wall = t->cpu ? other_now(t, now) : now;
	if (!since || since > wall)
		since = wall;
	if (since < c->wall_away)
		since = c->wall_away; /* never ready before it stopped */
	c->ready_at = since;
	c->is_ready = 1;
	t->nready++;
	count_behind(t, since);
out:
	cp_section_close(t);
}

void cp_task_time(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t now, int active,
		  struct cp_task_time *out)
{
	*out = (struct cp_task_time){.run_cpu = c->run_cpu,
				     .run_wall = c->run_wall,
				     .ready = c->ready,
				     .ready_max = c->ready_max};
	int running = active && t->cur == c && c->state == CP_CTX_RUNNING;
	struct both b = c->state == CP_CTX_FINISHED || !active ? (struct both){0, c->wall_away}
							       : both_seen(t, now);
	if (running) {
		out->run_cpu += b.cpu > t->in_cpu ? b.cpu - t->in_cpu : 0;
		out->run_wall += b.wall > t->in_wall ? b.wall - t->in_wall : 0;
	} else if (c->is_ready && active) {
		uint64_t from = ready_from(t, c), d = b.wall > from ? b.wall - from : 0;
		out->ready += d;
		if (d > out->ready_max)
			out->ready_max = d;
	}
	uint64_t end = c->state == CP_CTX_FINISHED ? c->wall_end : b.wall;
	out->life = c->begun && end > c->wall_begin ? end - c->wall_begin : 0;
}

/* Keeps a stall (rule 11): the step of c that just ended, ns long, of the task `id`
 * named `name` (c's own, or a loop step's: coprof_loop_step_end). A thread keeps its
 * CP_STALLS_KEPT longest and counts every one it lets go. Its stack is the step's longest call when that call held half
 * the step or more, else the stack c stopped at (the step's time was in the frames
 * still open). */
static void stall_keep(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t ns,
		       uint64_t wall, uint64_t id, const char *name)
{
	struct cp_stall_rec *s;
	t->last_stall_wall = 0; /* behind the stall kept last no more, whatever follows */
	/* From the thread's pool, never malloc: a switch may run in a signal handler. */
	if (!t->stalls &&
	    !(t->stalls = cp_pool_alloc(&t->pool, CP_STALLS_KEPT * sizeof(*t->stalls)))) {
		t->stalls_dropped++;
		return;
	}
	if (t->nstalls < CP_STALLS_KEPT) {
		s = &t->stalls[t->nstalls++];
	} else {
		s = &t->stalls[0];
		for (uint32_t i = 1; i < CP_STALLS_KEPT; i++)
			if (t->stalls[i].ns < s->ns)
				s = &t->stalls[i];
		t->stalls_dropped++;
		if (s->ns >= ns)
			return;
	}
	s->ns = ns;
	s->ctx_id = id;
	s->behind = t->ready_seen ? t->nready : UINT32_MAX;
	s->nticks = 0;
	if (t->p->opt.mode != COPROF_MODE_TRACE) {
		s->behind = UINT32_MAX; /* not known: no adapter says when a task is ready */
		size_t each = CP_STEP_TICKS * sizeof(*t->stall_ticks);
		if (!t->stall_ticks) /* none to be had: the stall is kept without a stack */
			t->stall_ticks = cp_pool_alloc(&t->pool, CP_STALLS_KEPT * each);
		if (t->stall_ticks && t->step_ticks) {
			memcpy(t->stall_ticks + (s - t->stalls) * CP_STEP_TICKS, t->step_ticks,
			       t->step_nticks * sizeof(*t->step_ticks));
			s->nticks = t->step_nticks;
		}
	}
	s->gen = ++t->stall_gen;
	t->last_stall = (uint32_t)(s - t->stalls);
	t->last_stall_wall = wall;
	size_t n = 0; /* by hand: this may run in a signal handler, where stdio may not */
	for (const char *from = name; from && from[n] && n < sizeof(s->name) - 1; n++)
		s->name[n] = from[n];
	s->name[n] = 0;
	/* The innermost call that held half the step: the call kept, or the longest,
	 * which encloses it, whose frames are the kept stack's from `skip` on. */
	uint32_t skip = t->step_kdepth - t->step_long_depth;
	if (t->step_depth && 2 * t->step_klen < ns && 2 * t->step_long >= ns &&
	    t->step_kdepth >= t->step_long_depth && skip < t->step_depth) {
		s->depth = t->step_depth - skip;
		memcpy(s->keys, t->step_keys + skip, s->depth * sizeof(s->keys[0]));
		return;
	}
	if (t->step_depth && 2 * t->step_klen >= ns) {
		s->depth = t->step_depth;
		memcpy(s->keys, t->step_keys, s->depth * sizeof(s->keys[0]));
		return;
	}
	s->depth = 0;
	for (uint32_t i = c->depth; i-- > 0 && s->depth < CP_STALL_FRAMES;)
		s->keys[s->depth++] = c->frames[i].rec->key;
}

/* A step of c, of task `id` named `name`, ends at thread clock `now`, wall clock
 * `wall` (a task suspends or finishes, or a loop step returns: rule 11). */
static void step_end(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t now,
		     uint64_t wall, uint64_t id, const char *name)
{
	uint32_t gen = t->stall_gen;
	if (t->step_open && now >= t->step_begin + t->p->opt.stall_ns)
		stall_keep(t, c, now - t->step_begin, wall, id, name);
	t->step_open = 0;
	t->step_long = UINT64_MAX;
	t->step_kept = t->stall_gen != gen;
}

/* Task c's step begins at thread clock `now`, its clock already caught up. In sample
 * mode no leave tells a step's longest point: its ticks do (coprof_step_tick). */
static void step_start(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t now)
{
	if (t->p->opt.mode != COPROF_MODE_TRACE) {
		/* From the pool, never malloc: a switch may run in a signal handler. */
		if (!t->step_ticks &&
		    !(t->step_ticks = cp_pool_alloc(&t->pool, CP_STEP_TICKS * sizeof(*t->step_ticks))))
			return;
		t->step_nticks = t->step_seen = 0;
		t->step_stride = 1;
		if (!atomic_load_explicit(&t->p->stepped, memory_order_relaxed))
			atomic_store_explicit(&t->p->stepped, 1, memory_order_relaxed);
	}
	t->step_open = 1;
	t->step_begin = now;
	t->step_vbegin = now - c->offset;
	t->step_depth = 0;
	t->step_long = t->p->opt.stall_ns / 2 ? t->p->opt.stall_ns / 2 - 1 : 0;
}

void coprof_step_tick(struct coprof_thread *t, const uintptr_t *pcs, unsigned depth)
{
	/* The thread itself, in a signal handler: inside an event section the step's
	 * fields may be half made; while the profiler is paused (a dump, a clear that
	 * gives the pool back) a section is not to be waited for here. */
	if (!t || !depth || (atomic_load_explicit(&t->seq, memory_order_relaxed) & 1))
		return;
	uint32_t s, st = cp_section_try(t, &s);
	if (st != t->seen || !t->step_open || !t->step_ticks ||
	    t->step_seen++ % t->step_stride) {
		cp_section_back_out(t, s);
		return;
	}
	if (t->step_nticks == CP_STEP_TICKS) {
		/* full: keep every other one, and take one tick in twice as many */
		for (uint32_t i = 0; i < CP_STEP_TICKS / 2; i++)
			t->step_ticks[i] = t->step_ticks[2 * i];
		t->step_nticks = CP_STEP_TICKS / 2;
		t->step_stride *= 2;
	}
	if ((t->step_seen - 1) % t->step_stride == 0) {
		struct cp_tick_stack *k = &t->step_ticks[t->step_nticks++];
		k->depth = depth < CP_STALL_FRAMES ? depth : CP_STALL_FRAMES;
		for (uint32_t i = 0; i < k->depth; i++) /* the innermost frames */
			k->keys[i] = pcs[i];
	}
	cp_section_close(t);
}

void coprof_loop_step_begin(struct coprof_thread *t)
{
	if (!t)
		return;
	uint32_t st = cp_section_open(t);
	/* a step of the driver's open still is one whose end was missed: it starts over */
	if (t->cur == &t->base && (st == t->seen || cp_thread_begin(t, st)))
		step_start(t, &t->base, cp_now(t));
	cp_section_close(t);
}

int coprof_loop_step_end(struct coprof_thread *t, uint64_t task_id, const char *name)
{
	if (!t)
		return 0;
	int kept = 0;
	uint32_t st = cp_section_open(t);
	if (t->cur == &t->base && t->step_open && st == t->seen) {
		uint64_t now = cp_now(t);
		step_end(t, &t->base, now, t->cpu ? other_now(t, now) : now, task_id, name);
		kept = t->step_kept;
	}
	cp_section_close(t);
	return kept;
}

void coprof_stall_behind(struct coprof_thread *t, uint32_t n)
{
	if (!t)
		return;
	uint32_t st = cp_section_open(t);
	if (st == t->seen && t->step_kept && t->stalls && t->last_stall < t->nstalls &&
	    t->stalls[t->last_stall].gen == t->stall_gen)
		t->stalls[t->last_stall].behind = n;
	cp_section_close(t);
}

/* Makes c the running context at thread clock `now`. Under cpu the incoming context's
 * clock skips the time it was away; under wall only the driver (the thread's own
 * context) turns its time away into its innermost frame's children (rule 9). `b`: both
 * clocks at `now`, for rule 12. */
static void switch_at(struct coprof_thread *t, struct coprof_ctx *c, uint64_t now, struct both b)
{
	struct coprof_ctx *old = t->cur;
	old->away = now;
	if (!old->is_base) {
		step_end(t, old, now, b.wall, old->id, old->name);
		run_add(t, old, b);
		old->state = CP_CTX_SUSPENDED;
		cp_ctx_stack_trim(old);
	}
	if (t->cpu) {
		if (now > c->away)
			c->offset += now - c->away;
	} else if (c->is_base && c->depth && now > c->away) {
		c->frames[c->depth - 1].children += now - c->away;
	}
	if (!c->is_base) {
		c->resumes++;
		if (!c->begun)
			c->wall_begin = b.wall;
		ready_end(t, c, b.wall, 1);
		if (!c->begun) {
			c->begun = 1;
			c->vbegin = now - c->offset;
		}
		step_start(t, c, now);
	}
	t->in_cpu = b.cpu;
	t->in_wall = b.wall;
	c->state = CP_CTX_RUNNING;
	t->switches++;
	t->cur = c;
}

/* The same, reading the other clock now (rule 12). */
static void switch_to(struct coprof_thread *t, struct coprof_ctx *c, uint64_t now)
{
	switch_at(t, c, now, both_now(t, now));
}

/* Outside a recording run only the running context changes: clocks are frozen at the
 * instant recording stopped, so the next run starts the new context's clock. */
static void switch_quiet(struct coprof_thread *t, struct coprof_ctx *c)
{
	if (!t->cur->is_base)
		t->cur->state = CP_CTX_SUSPENDED;
	c->state = CP_CTX_RUNNING;
	t->cur = c;
}

void coprof_ctx_switch(struct coprof_thread *t, struct coprof_ctx *c)
{
	if (!t)
		return;
	if (!c)
		c = &t->base;
	uint32_t st = cp_section_open(t);
	if (c->t != t) {
		t->foreign++;
		goto out;
	}
	if (c == t->cur || c->state == CP_CTX_FINISHED)
		goto out;
	if (st == t->seen || cp_thread_begin(t, st))
		switch_to(t, c, cp_now(t));
	else
		switch_quiet(t, c);
out:
	cp_section_close(t);
}

static void ids_remove(struct coprof_thread *t, struct coprof_ctx *c);

/* Keeps the newest CP_KEEP_FINISHED finished contexts' tables; folds the oldest. */
static void retire(struct coprof_thread *t, struct coprof_ctx *c)
{
	if (t->fin_tail)
		t->fin_tail->fnext = c;
	else
		t->fin_head = c;
	t->fin_tail = c;
	if (++t->nfin_kept <= CP_KEEP_FINISHED)
		return;
	struct coprof_ctx *old = t->fin_head;
	t->fin_head = old->fnext;
	if (!t->fin_head)
		t->fin_tail = NULL;
	old->fnext = NULL;
	t->nfin_kept--;
	cp_ctx_fold(&t->agg, old);
	t->nfolded++;
}

void coprof_ctx_finish(struct coprof_thread *t, struct coprof_ctx *c)
{
	if (!t || !c)
		return;
	uint32_t st = cp_section_open(t);
	if (c->t != t) {
		t->foreign++;
		goto out;
	}
	if (c->is_base || c->state == CP_CTX_FINISHED)
		goto out;
	if (c->in_ids)
		ids_remove(t, c);
	int rec = st == t->seen || cp_thread_begin(t, st);
	uint64_t now = rec ? cp_now(t) : t->last;
	struct both b = rec ? both_now(t, now) : (struct both){0, c->wall_away};
	if (rec && t->cur == c)
		/* while its open frames are still its stack */
		step_end(t, c, now, b.wall, c->id, c->name);
	if (rec)
		cp_ctx_close_all(c, now);
	c->vend = cp_ctx_vnow(c, now);
	ready_end(t, c, b.wall, 0);
	if (t->cur == c) {
		if (rec)
			switch_at(t, &t->base, now, b); /* its step's run ends there */
		else
			switch_quiet(t, &t->base);
	} else if (rec) {
		c->wall_away = b.wall;
	}
	c->wall_end = c->wall_away;
	c->state = CP_CTX_FINISHED;
	cp_ctx_stack_trim(c);
	retire(t, c);
out:
	cp_section_close(t);
}

/* --- task ids (coprof_task_switch): a chained hash owned by the thread ------------- */

static uint32_t id_hash(uint64_t id, uint32_t cap)
{
	return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static struct coprof_ctx *ids_find(struct coprof_thread *t, uint64_t id)
{
	if (!t->ids_cap)
		return NULL;
	for (struct coprof_ctx *c = t->ids[id_hash(id, t->ids_cap)]; c; c = c->idnext)
		if (c->id == id)
			return c;
	return NULL;
}

static int ids_add(struct coprof_thread *t, struct coprof_ctx *c)
{
	if (t->ids_n * 2 >= t->ids_cap) {
		uint32_t ncap = t->ids_cap ? t->ids_cap * 2 : 64;
		struct coprof_ctx **nb = calloc(ncap, sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		for (uint32_t i = 0; i < t->ids_cap; i++) {
			struct coprof_ctx *x = t->ids[i], *nx;
			for (; x; x = nx) {
				nx = x->idnext;
				uint32_t h = id_hash(x->id, ncap);
				x->idnext = nb[h];
				nb[h] = x;
			}
		}
		free(t->ids);
		t->ids = nb;
		t->ids_cap = ncap;
	}
	uint32_t h = id_hash(c->id, t->ids_cap);
	c->idnext = t->ids[h];
	t->ids[h] = c;
	c->in_ids = 1;
	t->ids_n++;
	return 0;
}

static void ids_remove(struct coprof_thread *t, struct coprof_ctx *c)
{
	struct coprof_ctx **pp = &t->ids[id_hash(c->id, t->ids_cap)];
	while (*pp && *pp != c)
		pp = &(*pp)->idnext;
	if (*pp) {
		*pp = c->idnext;
		t->ids_n--;
	}
	c->in_ids = 0;
	c->idnext = NULL;
}

/* --- the process default profiler and the calling thread's registration ---------- */

static struct coprof *_Atomic default_prof;

struct self_cache {
	struct coprof *p;
	uint64_t uid;
	struct coprof_thread *t;
};
static __thread struct self_cache self __attribute__((tls_model("initial-exec")));
static pthread_key_t self_key;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

/* A thread registered through coprof_thread_self exits: close its stacks, if its
 * profiler is still the default (otherwise it may be gone). */
static void self_exit(void *arg)
{
	struct coprof_thread *t = arg;
	struct coprof *p = atomic_load(&default_prof);
	if (p && self.t == t && self.p == p && self.uid == p->uid)
		coprof_thread_exit(t);
	self.t = NULL;
}

static void self_key_init(void)
{
	pthread_key_create(&self_key, self_exit);
}

void coprof_set_default(struct coprof *p)
{
	atomic_store(&default_prof, p);
}

struct coprof *coprof_default(void)
{
	return atomic_load(&default_prof);
}

struct coprof_thread *coprof_thread_self(void)
{
	struct coprof *p = atomic_load_explicit(&default_prof, memory_order_acquire);
	if (!p)
		return NULL;
	if (self.t && self.p == p && self.uid == p->uid)
		return self.t;
	char name[64] = "";
	pthread_getname_np(pthread_self(), name, sizeof(name));
	struct coprof_thread *t;
	if (coprof_thread_register(p, name, &t) != 0)
		return NULL;
	self.p = p;
	self.uid = p->uid;
	self.t = t;
	pthread_once(&self_once, self_key_init);
	pthread_setspecific(self_key, t);
	return t;
}

int coprof_task_switch(uint64_t task_id, const char *name)
{
	struct coprof_thread *t = coprof_thread_self();
	if (!t)
		return 0;
	if (task_id == 0) {
		coprof_ctx_switch(t, NULL);
		return 0;
	}
	struct coprof_ctx *c = ids_find(t, task_id);
	if (!c) {
		int rc = coprof_ctx_create(t, task_id, name, "task", &c);
		if (rc)
			return rc;
		cp_section_open(t);
		rc = ids_add(t, c);
		cp_section_close(t);
		if (rc)
			return rc;
	}
	coprof_ctx_switch(t, c);
	return 0;
}

int coprof_task_finish(uint64_t task_id)
{
	struct coprof_thread *t = coprof_thread_self();
	if (!t)
		return 0;
	struct coprof_ctx *c = ids_find(t, task_id);
	if (!c)
		return COPROF_ENOTASK;
	coprof_ctx_finish(t, c);
	return 0;
}
