/* backend-evalframe.c: the frame-evaluation backend (CPython 3.10 and 3.11, PEP 523): a
 * function of coprof's own in the interpreter's eval_frame slot, through which every
 * Python frame's evaluation passes (a call, and each run of a generator, coroutine or
 * async generator: gen_send_ex calls _PyEval_EvalFrame too). It reports the frame's
 * 'call', runs CPython's own _PyEval_EvalFrameDefault, then reports its 'return' with
 * the profile hook's arg: the value returned or yielded, NULL on an exception. Unlike
 * the profile function, it leaves the interpreter untraced (no per-instruction check
 * of use_tracing, no frame object made on 3.11, no C events): C builtins are not seen,
 * so COPROF_BUILTINS=1 keeps the profile function (install.c, backend()).
 *
 * The slot is interpreter-wide: threads started later need nothing. Installing and
 * removing run with the GIL held (the audit hook, or the shim's control thread). A
 * frame entered through the hook returns through it even after the hook was taken off
 * (it stays on the C stack): its return is reported only when no start, stop or fork
 * happened since its call was (eval_return). Per-thread state lives in
 * thread-local storage, as with sys.monitoring.
 *
 * coprof's function is known by its address, wherever it is: a PEP 523 user (a
 * debugger) may chain to it and put it back in the slot later, whether profiling is
 * on or off then. It reports events only while this backend is the one on
 * (eval_call), so no call is ever reported by two backends. When the thread runs short
 * of C stack (3.11) it hands over to the profile function (pl_py_evalframe_hand_over). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

int pl_py_evalframe_on, pl_py_evalframe_handed;

#if PY_VERSION_HEX < 0x030C0000

#define GEN_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)

/* What coprof's eval() keeps while a frame runs, in one word: the only value it holds
 * on the C stack meanwhile, so that its frame there is as small as a C frame can be
 * (a recursion that runs to its end unprofiled must run to its end through it): the
 * frame (frames are 8-byte aligned), the throwflag, whether the frame's 'call' was
 * reported, and the parity of the generation it was reported in. */
#define PL_PY_EVAL_REPORTED ((uintptr_t)1)
#define PL_PY_EVAL_THROWN ((uintptr_t)2)
#define PL_PY_EVAL_GEN ((uintptr_t)4)
#define PL_PY_EVAL_BITS ((uintptr_t)7)
struct pl_py_eval_run {
	uintptr_t word;
	PyThreadState *ts; /* the frame's thread state, given back in a register */
};

_Static_assert(_Alignof(PL_PY_FRAME) > PL_PY_EVAL_BITS, "a frame's low bits are free");

static void pl_py_evalframe_hand_over(struct pl_py_thread *pt);

/* The last quarter of the calling thread's C stack (at least 128 KiB), or 1, 1 when
 * unknown. */
static void stack_bounds(struct pl_py_thread *pt)
{
	pthread_attr_t a;
	void *lo;
	size_t size;
	pt->stack_base = pt->stack_low = 1;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &lo, &size) == 0 && lo && size) {
		size_t margin = size / 4 > 128 * 1024 ? size / 4 : 128 * 1024;
		pt->stack_base = (uintptr_t)lo;
		pt->stack_low = (uintptr_t)lo + (margin < size ? margin : size);
	}
	pthread_attr_destroy(&a);
}

/* A frame one Python call deeper than the last one is this far below it at most, to
 * be taken for the cost of a call (a coroutine's own stack, a greenlet's copy: not). */
#define EVAL_STEP_MAX (64 * 1024)

/* The frame-evaluation backend hands over to the profile function for the C stack: on
 * 3.11 (stack_short). */
#define EVAL_HANDS_OVER (PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000)

/* 3.11: nonzero when the thread must hand over to the profile function before running
 * the frame whose C stack pointer is sp. Each frame run through the slot is a C frame
 * of the interpreter, which otherwise runs Python-to-Python calls in one, and those
 * frames stay on the stack after the hand-over. So the hand-over comes as soon as the
 * rest of the recursion Python allows (the limit less the depth) would not fit above
 * the stack's end at the cost of a call last measured here: most often at the
 * program's first call after it raised the limit that far, with few frames on the
 * stack; at the latest with three quarters of the stack used (a limit that fits, but
 * calls that grew dearer). Frames on another stack than the thread's own (a coroutine
 * library's) are not checked. (3.10 never hands over for its stack: there the profile
 * function takes more C stack per Python call than coprof's eval(), above.) */
static inline int stack_short(struct pl_py_thread *pt, PyThreadState *ts, uintptr_t sp)
{
	if (!EVAL_HANDS_OVER)
		return 0;
	if (pl_py_unlikely(!pt->stack_low))
		stack_bounds(pt);
	if (sp < pt->stack_base)
		return 0;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
	int limit = ts->recursion_limit;
	int depth = limit - ts->recursion_remaining;
#else
	int limit = 0, depth = 0;
#endif
	if (depth == pt->eval_depth + 1 && sp < pt->eval_sp && pt->eval_sp - sp < EVAL_STEP_MAX)
		pt->eval_step = pt->eval_sp - sp;
	pt->eval_sp = sp;
	pt->eval_depth = depth;
	if (pl_py_unlikely(sp < pt->stack_low))
		return 1;
	return depth < limit && (uintptr_t)(limit - depth) * pt->eval_step > sp - pt->stack_base;
}

/* A frame starts a run through coprof's function, on thread state ts: its 'call' is
 * reported (PL_PY_EVAL_REPORTED) unless the backend is not the one on, nothing is
 * recorded for the thread, or it runs inside another event's own call into Python,
 * which no backend reports. Never inlined into eval(), whose C frame stays on the
 * stack while the Python frame runs: its own frame is gone by then. */
static __attribute__((noinline)) struct pl_py_eval_run eval_call(PyThreadState *ts, PL_PY_FRAME *fr,
								 int thrown)
{
	struct pl_py_eval_run run = {(uintptr_t)fr | (thrown ? PL_PY_EVAL_THROWN : 0), ts};
	/* Off, or another backend on: coprof's function runs only because a PEP 523
	 * user chains to it, or put it back in the slot, where it is taken out (3.11
	 * inlines Python calls again, as with the default the program found). */
	if (pl_py_unlikely(!pl_py_evalframe_on)) {
		pl_py_evalframe_stop();
		return run;
	}
	struct pl_py_thread *pt = thread_current();
	if (pl_py_unlikely(!pt || pt->busy))
		return run;
	if (pl_py_unlikely(stack_short(pt, ts, (uintptr_t)__builtin_frame_address(0)))) {
		pl_py_evalframe_hand_over(pt);
		return run;
	}
	run.word |= PL_PY_EVAL_REPORTED | (pt->gen & 1 ? PL_PY_EVAL_GEN : 0);
	pt->busy = 1;
	on_call(pt, fr, thrown);
	pt->busy = 0;
	return run;
}

/* The run eval_call reported ended with `r` (the value returned or yielded; NULL: an
 * exception): its 'return', unless the backend was taken off, or profiling stopped,
 * restarted or the process forked since (an odd number of times: an even one reports
 * it, as the profile function does, and the engine drops a return whose call it has
 * not seen). Returns r. Never inlined into eval(), as eval_call. */
static __attribute__((noinline)) PyObject *eval_return(uintptr_t word, PyObject *r)
{
	unsigned gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
	struct pl_py_thread *pt = pl_py_tls_pt;
	if (pl_py_unlikely(!pl_py_evalframe_on || !pt || !(word & PL_PY_EVAL_GEN) != !(gen & 1)))
		return r;
	pt = thread_ready(pt);
	if (pl_py_unlikely(!pt))
		return r;
	pt->busy = 1;
	on_return(pt, (PL_PY_FRAME *)(word & ~PL_PY_EVAL_BITS), r);
	pt->busy = 0;
	return r;
}

/* Not instrumented by AddressSanitizer: this frame stays on the C stack while the
 * frame runs, and greenlet copies stack slices in and out with memcpy as it switches,
 * which ASan takes for an overflow of this frame's redzones. Without a frame pointer
 * (GCC): it holds one word over _PyEval_EvalFrameDefault, and takes 16 bytes of the C
 * stack per Python call (32 with clang, which keeps the frame pointer). 3.10 makes a C frame per
 * call anyway: with 8 MiB a recursion there reaches 96% of its unprofiled depth (19,375 calls
 * against 20,117), where the 64 bytes this took before, with a hand-over at three quarters of the
 * stack, gave 85%, and the profile function, whose C frame per call cProfile pays too, 81%. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("omit-frame-pointer")))
#endif
__attribute__((no_sanitize("address"))) static PyObject *
eval(PyThreadState *ts, PL_PY_FRAME *fr, int throwflag)
{
#if PY_VERSION_HEX >= 0x030B0000
	/* 3.11 calls a generator function by running its frame up to
	 * RETURN_GENERATOR, which copies it into the new generator: not a run of the
	 * generator (the profile function sees none), which starts at its first send. */
	if (pl_py_unlikely(fr->f_code->co_flags & GEN_FLAGS) &&
	    fr->owner != FRAME_OWNED_BY_GENERATOR)
		return _PyEval_EvalFrameDefault(ts, fr, throwflag);
	/* _PyEval_EvalFrameDefault links the frame to its caller as it starts; the
	 * 'call' reads the chain below it first. The same value. */
	fr->previous = ts->cframe->current_frame;
#endif
	struct pl_py_eval_run run = eval_call(ts, fr, throwflag);
	PyObject *r = _PyEval_EvalFrameDefault(run.ts, (PL_PY_FRAME *)(run.word & ~PL_PY_EVAL_BITS),
					       !!(run.word & PL_PY_EVAL_THROWN));
	return run.word & PL_PY_EVAL_REPORTED ? eval_return(run.word, r) : r;
}

int pl_py_evalframe_start(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	/* coprof's own, already there (put back by a PEP 523 user that had chained to
	 * it): taken as it is. */
	if (in->eval_frame == eval)
		return 0;
	/* Someone else's (a debugger's, a JIT's): never replaced. */
	if (in->eval_frame && in->eval_frame != _PyEval_EvalFrameDefault)
		return -EBUSY;
	_PyInterpreterState_SetEvalFrameFunc(in, eval);
	return in->eval_frame == eval ? 0 : -EBUSY;
}

void pl_py_evalframe_stop(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	if (in->eval_frame != eval)
		return; /* someone else's now: it stays, and chains to a silent eval() */
	_PyInterpreterState_SetEvalFrameFunc(in, _PyEval_EvalFrameDefault);
#if PY_VERSION_HEX >= 0x030B0000
	/* Empty, as it was: 3.11 inlines Python-to-Python calls only when the slot is
	 * NULL (3.10 calls through it, and starts with the default). */
	if (in->eval_frame == _PyEval_EvalFrameDefault)
		in->eval_frame = NULL;
#endif
}

/* The frame-evaluation backend's thread pt runs short of C stack (GIL held, in an
 * event, stack_short): the slot is emptied (3.11 inlines Python calls again) and the
 * profile function goes on every thread that has none for the rest of the window. It
 * reports the returns of the frames whose calls the slot reported (pl_py_eval_return
 * reports none from now on). The calling thread's task state moves to the profile
 * function's state of its thread; other threads' start afresh (their running task is
 * adopted at its next resume). Counted as dropped ("python evalframe stack").
 *
 * A thread that runs a profile function of the program's own (cProfile,
 * sys.setprofile) keeps it: the program's profiler sees every call, and coprof
 * records nothing more on that thread in this window (its frames open then are
 * closed at the dump, as when the program replaces coprof's profile function).
 * Counted as dropped ("python threads kept their profiler", one per thread) and said
 * once in the notes. */
static void pl_py_evalframe_hand_over(struct pl_py_thread *pt)
{
	pl_py_evalframe_stop();
	pl_py_evalframe_on = 0;
	pl_py_evalframe_handed = 1;
	pl_py_profile_install(NULL);
	struct coprof *p = *pl_py_host->prof;
	unsigned kept = pl_py_profile_foreign(PyThreadState_GetInterpreter(PyThreadState_Get()));
	if (p)
		coprof_count_dropped(p, "python evalframe stack", 1);
	static struct coprof *said;
	if (p && kept) {
		coprof_count_dropped(p, "python threads kept their profiler", kept);
		if (said != p)
			(void)coprof_set_note(
			    p, "python evalframe stack: a thread that ran a profile function of "
			       "the program's own at the hand-over kept it, and was not profiled "
			       "by coprof for the rest of that window (dropped: python threads "
			       "kept their profiler)");
		said = p;
	}
	struct pl_py_thread *np = pl_py_profile_state(PyThreadState_Get());
	if (!np || np == pt)
		return;
	struct pl_py_chain c = {0};
	np->t = pt->t;
	np->gen = pt->gen;
	pl_py_chain_save(pt, &c);
	pl_py_chain_load(np, &c);
	pl_py_map_free(&np->agens);
	np->agens = pt->agens;
	memset(&pt->agens, 0, sizeof(pt->agens));
}

#else /* 3.12+: sys.monitoring instead */

int pl_py_evalframe_start(void)
{
	return -ENOTSUP;
}

void pl_py_evalframe_stop(void)
{
}

#endif
