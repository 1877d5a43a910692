/* helpers.c: the engine tests' fake clock, named keys and snapshot lookups (helpers.h).
 * Single-threaded: each Criterion test runs in its own process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "helpers.h"

uint64_t fk_now;
struct fx f;

uint64_t fk_clock(void *arg)
{
	(void)arg;
	return fk_now;
}

static const char *names[256];
static unsigned nnames;

uintptr_t K(const char *name)
{
	for (unsigned i = 0; i < nnames; i++)
		if (!strcmp(names[i], name))
			return i + 1;
	cr_assert_lt(nnames, 256);
	names[nnames++] = name;
	return nnames;
}

int fx_resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	if (key == 0 || key > nnames)
		return -ENOENT;
	out->file = "test.c";
	out->line = (unsigned)key;
	out->name = names[key - 1];
	return 0;
}

void fx_setup(struct fx *x, enum coprof_clock clock)
{
	struct coprof_options o = {.clock = clock, .fake_clock = fk_clock};
	memset(x, 0, sizeof(*x));
	fk_now = 0;
	cr_assert_eq(coprof_create(&o, &x->p), 0);
	cr_assert_eq(coprof_add_resolver(x->p, fx_resolve, NULL), 0);
	cr_assert_eq(coprof_thread_register(x->p, "main", &x->t), 0);
	cr_assert_eq(coprof_start(x->p), 0);
}

void fx_setup_sample(struct fx *x, enum coprof_clock clock)
{
	struct coprof_options o = {
	    .clock = clock, .mode = COPROF_MODE_SAMPLE, .hz = 1000, .fake_clock = fk_clock};
	memset(x, 0, sizeof(*x));
	fk_now = 0;
	cr_assert_eq(coprof_create(&o, &x->p), 0);
	cr_assert_eq(coprof_add_resolver(x->p, fx_resolve, NULL), 0);
	cr_assert_eq(coprof_thread_register(x->p, "main", &x->t), 0);
}

void fx_snap(struct fx *x)
{
	if (x->prof)
		cp_profile_free(x->prof);
	x->prof = NULL;
	cr_assert_eq(cp_snapshot(x->p, &x->prof), 0);
}

void fx_teardown(struct fx *x)
{
	if (x->prof)
		cp_profile_free(x->prof);
	coprof_destroy(x->p);
}

void at(uint64_t t)
{
	fk_now = t;
}

void enter(const char *name)
{
	coprof_enter(f.t, K(name));
}

void leave(const char *name)
{
	coprof_leave(f.t, K(name));
}

void fx_fini(void)
{
	fx_teardown(&f);
}

const struct cp_func *fx_func(const struct cp_stats *s, const char *name)
{
	for (uint32_t i = 0; i < s->nfuncs; i++)
		if (!strcmp(s->funcs[i].key.name, name))
			return &s->funcs[i];
	return NULL;
}

const struct cp_stat *fx_edge(const struct cp_stats *s, const char *caller, const char *callee)
{
	const struct cp_func *fn = fx_func(s, callee);
	if (!fn)
		return NULL;
	for (uint32_t i = 0; i < fn->ncallers; i++)
		if (!strcmp(s->funcs[fn->callers[i].caller].key.name, caller))
			return &fn->callers[i].s;
	return NULL;
}

const struct cp_task *fx_task(const struct cp_profile *p, uint64_t id)
{
	for (uint32_t i = 0; i < p->ex.ntasks; i++)
		if (p->ex.tasks[i].id == id)
			return &p->ex.tasks[i];
	return NULL;
}

uint64_t fx_ns(double seconds)
{
	return (uint64_t)llround(seconds * 1e9);
}

void fx_expect(const struct cp_stats *s, const char *name, uint64_t cc, uint64_t nc, uint64_t tt,
	       uint64_t ct)
{
	const struct cp_func *fn = fx_func(s, name);
	cr_assert_not_null(fn, "no function %s", name);
	cr_expect_eq(fn->s.cc, cc, "%s: cc %lu, want %lu", name, fn->s.cc, cc);
	cr_expect_eq(fn->s.nc, nc, "%s: nc %lu, want %lu", name, fn->s.nc, nc);
	cr_expect_eq(fx_ns(fn->s.tt), tt, "%s: tt %lu ns, want %lu", name, fx_ns(fn->s.tt), tt);
	cr_expect_eq(fx_ns(fn->s.ct), ct, "%s: ct %lu ns, want %lu", name, fx_ns(fn->s.ct), ct);
}

void fx_expect_edge(const struct cp_stats *s, const char *caller, const char *callee, uint64_t cc,
		    uint64_t nc, uint64_t tt, uint64_t ct)
{
	const struct cp_stat *e = fx_edge(s, caller, callee);
	cr_assert_not_null(e, "no edge %s -> %s", caller, callee);
	cr_expect_eq(e->cc, cc, "%s->%s: cc %lu, want %lu", caller, callee, e->cc, cc);
	cr_expect_eq(e->nc, nc, "%s->%s: nc %lu, want %lu", caller, callee, e->nc, nc);
	cr_expect_eq(fx_ns(e->tt), tt, "%s->%s: tt %lu, want %lu", caller, callee, fx_ns(e->tt),
		     tt);
	cr_expect_eq(fx_ns(e->ct), ct, "%s->%s: ct %lu, want %lu", caller, callee, fx_ns(e->ct),
		     ct);
}
