/* test-stack-name.c: how a stack found in samples gets its name (preload/sampler/
 * stack-sampled.c), on made-up records: the real naming code against a stub symbol table
 * and stub engine calls, so which frame a tick caught is chosen, not left to timing.
 *
 * The case behind it: a Boost fiber of a program without hooks is named after the
 * first function of the program's own its samples show. The shim's fcontext wrappers
 * (entry, jump_fcontext) run on the fiber with no frame of the program's under them
 * yet; a tick there (drawn by page faults in the adapter's handle table, under load)
 * named the fiber "entry" in CI (runtime-fiber-plain-sample-cpu under ASan). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sampler/sampler.h"
#include "service/service.h"
#include "state/state.h"

/* --- stubs of what stack-sampled.c calls -------------------------------------------- */

/* Made-up code addresses: the shim's text is [SHIM_LO, SHIM_HI). */
#define SHIM_LO 0x7000u
#define SHIM_HI 0x8000u
enum {
	PC_HEAVY_WORK = 0x1100,	 /* the program's: /src/fiber.cpp */
	PC_HEAVY_TASK = 0x1200,	 /* the program's */
	PC_FIBER_ENTRY = 0x2100, /* Boost's template, instantiated in the program */
	PC_TRAMPOLINE = 0x3100,	 /* libboost_context.so, no debug info */
	PC_SHIM_ENTRY = 0x7100,	 /* the fcontext adapter's entry() */
	PC_SHIM_JUMP = 0x7200,	 /* its jump_fcontext wrapper */
	PC_SHIM_PUT = 0x7300,	 /* map_put, under either */
};

static const struct {
	uintptr_t lo, hi;
	const char *name, *file;
} funcs[] = {
    {0x1100, 0x1200, "heavy_work", "/src/fiber.cpp"},
    {0x1200, 0x1300, "heavy_task", "/src/fiber.cpp"},
    {0x2100, 0x2200, "fiber_entry<...>", "/usr/include/boost/context/fiber_fcontext.hpp"},
    {0x3100, 0x3200, "trampoline", "/usr/lib/x86_64-linux-gnu/libboost_context.so.1"},
    /* the shim built from a source tree, with its DWARF: files a program's could have */
    {0x7100, 0x7200, "entry", "/build/coprof/preload/runtime/fcontext/adapter-fcontext.c"},
    {0x7200, 0x7300, "jump_fcontext", "/build/coprof/preload/runtime/fcontext/adapter-fcontext.c"},
    {0x7300, 0x7400, "map_put", "/build/coprof/preload/runtime/fcontext/adapter-fcontext.c"},
};

static int syms_token;
struct pl_symbols *pl_syms = (struct pl_symbols *)&syms_token;
struct coprof *pl_prof = (struct coprof *)&syms_token;
struct pl_sampler_conf pl_sconf = {.self_lo = SHIM_LO, .self_hi = SHIM_HI};
__thread struct pl_stack_tls pl_stls PL_TLS;
__thread struct pl_tls pl_tls_data PL_TLS;

int pl_symbols_lookup(struct pl_symbols *s, uintptr_t pc, struct coprof_func_info *out)
{
	(void)s;
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
		if (pc >= funcs[i].lo && pc < funcs[i].hi) {
			memset(out, 0, sizeof(*out));
			out->name = funcs[i].name;
			out->file = funcs[i].file;
			return 0;
		}
	return -ENOENT;
}

/* The rule of service/stacks.c, which this test does not link (it needs the engine). */
int pl_stack_own_function(const struct coprof_func_info *info)
{
	return info->file && info->file[0] == '/' &&
	       strncmp(info->file, "/usr/include/", 13) != 0 &&
	       strncmp(info->file, "/usr/lib/", 9) != 0;
}

static char made_names[8][64];
static int nmade;

int coprof_ctx_create_sampled(struct coprof_thread *t, uint64_t id, const char *name,
			      const char *runtime, struct coprof_ctx **out)
{
	(void)t;
	(void)id;
	(void)runtime;
	cr_assert(nmade < 8);
	snprintf(made_names[nmade], sizeof(made_names[0]), "%s", name);
	*out = (struct coprof_ctx *)(uintptr_t)(++nmade);
	return 0;
}

void coprof_ctx_finish_sampled(struct coprof_ctx *c)
{
	(void)c;
}

int coprof_ctx_set_name(struct coprof_ctx *c, const char *name)
{
	(void)c;
	(void)name;
	return 0;
}

uint64_t pl_stack_next_id(void)
{
	return 1;
}

int pl_sig_maybe_in_handler(void)
{
	return 0;
}

int pl_stack_owns_ctx(const struct pl_stack *s, const struct coprof_thread *th)
{
	(void)s;
	(void)th;
	return 0;
}

/* --- the fcontext fiber's name from its samples ------------------------------------ */

static struct coprof_ctx *const FIBER_CTX = (struct coprof_ctx *)(uintptr_t)0x99;

/* A tick on fiber `s` whose stack (innermost first) is `pcs`, folded as the sampler's
 * drain does: the shim's frames at the stack's root cut first. */
static void fold_tick(struct pl_stack *s, const uintptr_t *pcs, uint32_t n)
{
	struct pl_rec rec;
	memset(&rec, 0, sizeof(rec));
	rec.ctx = FIBER_CTX;
	rec.fiber = s;
	rec.depth = n;
	memcpy(rec.pcs, pcs, n * sizeof(pcs[0]));
	pl_stack_fold_name(&rec, pl_stack_user_depth(rec.pcs, rec.depth));
}

static void fiber_init(struct pl_stack *s)
{
	memset(s, 0, sizeof(*s));
	s->naming = 1;
	s->ctx = FIBER_CTX;
	s->name = "fiber_entry<...>";
}

/* A tick whose stack holds no frame of the program's leaves the fiber unnamed. */
static void tick_names_nothing(struct pl_stack *s, const uintptr_t *pcs, unsigned n)
{
	fold_tick(s, pcs, n);
	cr_expect_null(s->fold_name, "named %s from the shim's frames", s->fold_name);
}

/* A tick in heavy_work, called by heavy_task on the fiber: it names the fiber
 * heavy_task (after ticks that named nothing). */
static void tick_working_names(struct pl_stack *s)
{
	const uintptr_t working[] = {PC_HEAVY_WORK + 8, PC_HEAVY_TASK + 8, PC_FIBER_ENTRY + 8,
				     PC_SHIM_ENTRY + 8, PC_TRAMPOLINE + 8};
	fold_tick(s, working, 5);
	cr_assert_not_null(s->fold_name);
	cr_expect_str_eq(s->fold_name, "heavy_task");
}

/* A tick between the first jump and the fiber's function (map_put under entry, as
 * entry() records the handle it was resumed with): no function of the program's has
 * run, and the fiber stays unnamed until one does. */
Test(stack_name, tick_in_the_adapters_entry_does_not_name_the_fiber)
{
	struct pl_stack s;
	fiber_init(&s);
	const uintptr_t in_entry[] = {PC_SHIM_PUT + 8, PC_SHIM_ENTRY + 8, PC_TRAMPOLINE + 8};
	const uintptr_t at_entry[] = {PC_SHIM_ENTRY + 8, PC_TRAMPOLINE + 8};
	tick_names_nothing(&s, in_entry, 3);
	tick_names_nothing(&s, at_entry, 2);
	tick_working_names(&s);
}

/* Boost's fiber_entry jumps back to the maker at once, and its first resume returns
 * through the jump_fcontext wrapper: a tick in it holds Boost's frame under the
 * shim's only. */
Test(stack_name, tick_in_the_jump_wrapper_does_not_name_the_fiber)
{
	struct pl_stack s;
	fiber_init(&s);
	const uintptr_t in_jump[] = {PC_SHIM_PUT + 8, PC_SHIM_JUMP + 8, PC_FIBER_ENTRY + 8,
				     PC_SHIM_ENTRY + 8, PC_TRAMPOLINE + 8};
	tick_names_nothing(&s, in_jump, 5);
	tick_working_names(&s);
}

/* The first tick with a frame of the program's names it; later ones do not rename. */
Test(stack_name, the_first_program_frame_names_the_fiber_for_good)
{
	struct pl_stack s;
	fiber_init(&s);
	tick_working_names(&s);
	const uintptr_t deeper[] = {PC_HEAVY_WORK + 8, PC_FIBER_ENTRY + 8, PC_SHIM_ENTRY + 8,
				    PC_TRAMPOLINE + 8};
	fold_tick(&s, deeper, 4);
	cr_expect_str_eq(s.fold_name, "heavy_task", "renamed by a later tick");
}

/* --- a stack no adapter knows, named at its first sample ----------------------------- */

/* The same rule for a stack found from the stack pointer: its first sample, caught in
 * a function of the shim the runtime called (no frame of the program's under it),
 * makes no task named after the shim; the program's entry names the next. */
Test(stack_name, detected_stack_is_not_named_after_the_shim)
{
	struct pl_sthread st;
	memset(&st, 0, sizeof(st));
	st.thread = (struct coprof_thread *)(uintptr_t)1;
	nmade = 0;
	struct pl_rec rec;
	memset(&rec, 0, sizeof(rec));
	rec.sp = 0x500000;
	rec.base = 0x510000;
	const uintptr_t in_shim[] = {PC_SHIM_JUMP + 8, PC_TRAMPOLINE + 8};
	memcpy(rec.pcs, in_shim, sizeof(in_shim));
	rec.depth = 2;
	cr_expect_null(pl_stack_fold(&st, &rec, 2), "a task made from the shim's frames");
	cr_expect_eq(nmade, 0, "task %s made", nmade ? made_names[0] : "");
	const uintptr_t working[] = {PC_HEAVY_WORK + 8, PC_HEAVY_TASK + 8, PC_TRAMPOLINE + 8};
	memcpy(rec.pcs, working, sizeof(working));
	rec.depth = 3;
	cr_expect_not_null(pl_stack_fold(&st, &rec, 3));
	cr_assert_eq(nmade, 1);
	cr_expect_str_eq(made_names[0], "heavy_task");
	pl_stack_fold_free(&st);
}

/* The engine runs the fiber's context from before the jump to after the jump back: a
 * tick on the maker's stack then (its walk: the wrapper, Boost's resume, main,
 * _start) is the fiber's, but does not name it; one on the fiber's stack may. */
Test(stack_name, only_a_tick_on_the_fibers_stack_may_name_it)
{
	struct pl_stack s;
	fiber_init(&s);
	s.lo = 0x600000;
	s.hi = 0x620000;
	pl_stls.cur = &s;
	cr_expect_null(pl_stack_unnamed(FIBER_CTX, 0x7ffc0000), "a tick on the maker's stack");
	cr_expect_null(pl_stack_unnamed(FIBER_CTX, s.hi), "a tick above the fiber's stack");
	cr_expect_eq(pl_stack_unnamed(FIBER_CTX, s.hi - 0x100), &s);
	cr_expect_eq(pl_stack_unnamed(FIBER_CTX, s.lo), &s);
	cr_expect_null(pl_stack_unnamed((struct coprof_ctx *)(uintptr_t)0x98, s.hi - 0x100),
		       "another context's tick");
	s.naming = 0;
	cr_expect_null(pl_stack_unnamed(FIBER_CTX, s.hi - 0x100), "a fiber named already");
	pl_stls.cur = NULL;
}
