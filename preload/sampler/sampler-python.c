/* sampler-python.c: Python frames in sample mode, the shim's side. async-signal-safe
 * but for pl_sampler_python_init (the shim's constructor).
 *
 * In a CPython process the Python adapter (python/sampling/) lends the tick handler a
 * function that reads the interrupted thread's Python frames. A tick then records those
 * frames, innermost first, under the adapter's keys, plus the interrupted pc at the leaf
 * when it lies outside the interpreter and the dynamic loader (the C function Python
 * was calling: an extension, libc); with COPROF_NATIVE=1 it records the native stack instead, with
 * each C frame of the eval loop replaced by the Python frames that C call ran (as py-spy --native).
 */
/* async-signal-safe */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "sampler.h"

pl_py_sample_fn pl_sampler_python;
void (*pl_sampler_python_fold)(void);
void (*pl_sampler_python_after_fold)(void);
int (*pl_sampler_python_claim)(uintptr_t coro, uintptr_t root_key, unsigned gen,
			       struct coprof_ctx **out);

/* The interpreter's text (libpython, or the executable of a static build), and the eval
 * loop's function in it. Set once by pl_sampler_python_init. */
static uintptr_t interp_lo, interp_hi;
static uintptr_t eval_lo, eval_hi;
/* The dynamic loader's text: its __tls_get_addr serves the interpreter's own
 * thread-locals, so a pc there is the interpreter's work, not a C function it called. */
static uintptr_t ld_lo, ld_hi;

void pl_sampler_python_init(void)
{
	if (!pl_sampler_python)
		return;
	void *eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	struct pl_text_range r = {.at = (uintptr_t)eval};
	if (pl_text_range(&r)) {
		interp_lo = r.lo;
		interp_hi = r.hi;
	}
	r = (struct pl_text_range){.at = (uintptr_t)dlsym(RTLD_DEFAULT, "__tls_get_addr")};
	if (pl_text_range(&r)) {
		ld_lo = r.lo;
		ld_hi = r.hi;
	}
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (eval && dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
		eval_lo = (uintptr_t)eval;
		eval_hi = eval_lo + sym->st_size;
	}
}

int pl_sampler_python_read(struct pl_py_sample *s, const ucontext_t *uc)
{
	if (!pl_sampler_python || !uc)
		return 0;
	s->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	s->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	return pl_sampler_python(s);
}

void pl_sampler_python_fill(struct pl_sthread *st, struct pl_rec *rec, const struct pl_py_sample *s,
			    int n, const ucontext_t *uc)
{
	uint32_t d = 0;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (!(pc >= interp_lo && pc < interp_hi) && !(pc >= ld_lo && pc < ld_hi) &&
	    !pl_pc_is_ours(pc))
		rec->pcs[d++] = pc;
	int i = 0;
	for (; i < n && d < PL_SAMPLE_DEPTH; i++)
		rec->pcs[d++] = s->keys[i];
	if (s->truncated || i < n)
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	rec->depth = d;
}

void pl_sampler_python_merge(struct pl_sthread *st, struct pl_rec *rec,
			     const struct pl_py_sample *s, int n)
{
	uintptr_t native[PL_SAMPLE_DEPTH];
	uint32_t nd = rec->depth < PL_SAMPLE_DEPTH ? rec->depth : PL_SAMPLE_DEPTH;
	memcpy(native, rec->pcs, nd * sizeof(native[0]));
	uint32_t d = 0;
	unsigned g = 0, evals = 0;
	int k = 0;
	for (uint32_t i = 0; i < nd; i++)
		evals += native[i] >= eval_lo && native[i] < eval_hi;
	if (evals > s->ngroups) {
		/* More eval-loop C frames than the thread state says run: the tick came as a
		 * call or a return was half done (3.10: between the eval loop's exit and its
		 * caller's result check), and which C frame ran which Python frames cannot be
		 * told. The Python frames alone, with the C leaf outside the interpreter, as
		 * without --native: never a frame in the wrong place. */
		if (nd && !(native[0] >= interp_lo && native[0] < interp_hi) &&
		    !(native[0] >= ld_lo && native[0] < ld_hi) && !pl_pc_is_ours(native[0]))
			rec->pcs[d++] = native[0];
		for (; k < n && d < PL_SAMPLE_DEPTH; k++)
			rec->pcs[d++] = s->keys[k];
		if (k < n)
			atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
		rec->depth = d;
		return;
	}
	for (uint32_t i = 0; i < nd && d < PL_SAMPLE_DEPTH; i++) {
		if (native[i] >= eval_lo && native[i] < eval_hi && g < s->ngroups) {
			for (unsigned j = 0; j < s->groups[g] && k < n && d < PL_SAMPLE_DEPTH; j++)
				rec->pcs[d++] = s->keys[k++];
			g++;
			continue;
		}
		rec->pcs[d++] = native[i];
	}
	/* Frames whose C frames the unwinder did not reach go at the root end. */
	while (k < n && d < PL_SAMPLE_DEPTH)
		rec->pcs[d++] = s->keys[k++];
	if (k < n)
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	rec->depth = d;
}

void pl_sampler_python_cut(struct pl_rec *rec, unsigned frames)
{
	unsigned seen = 0;
	for (uint32_t i = 0; i < rec->depth; i++)
		if ((rec->pcs[i] >> 63) && ++seen == frames) {
			rec->depth = i + 1;
			return;
		}
}
