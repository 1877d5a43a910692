/* evalframe.c: the frame-evaluation backend (CPython 3.10 and 3.11, PEP 523): a
 * function of coprof's own in the interpreter's eval_frame slot, through which every
 * Python frame's evaluation passes (a call, and each run of a generator, coroutine or
 * async generator: gen_send_ex calls _PyEval_EvalFrame too). It reports the frame's
 * 'call', runs CPython's own _PyEval_EvalFrameDefault, then reports its 'return' with
 * the profile hook's arg: the value returned or yielded, NULL on an exception. Unlike
 * the profile function, it leaves the interpreter untraced (no per-instruction check
 * of use_tracing, no frame object made on 3.11, no C events): C builtins are not seen,
 * so COPROF_BUILTINS=1 keeps the profile function (hook.c, backend()).
 *
 * The slot is interpreter-wide: threads started later need nothing. Installing and
 * removing run with the GIL held (the audit hook, or the shim's control thread). A
 * frame entered through the hook returns through it even after the hook was taken off
 * (it stays on the C stack): its return is reported only when no start, stop or fork
 * happened since its call was (hook.c, pl_py_eval_return). Per-thread state lives in
 * thread-local storage, as with sys.monitoring.
 *
 * coprof's function is known by its address, wherever it is: a PEP 523 user (a
 * debugger) may chain to it and put it back in the slot later, whether profiling is
 * on or off then. It reports events only while this backend is the one on (hook.c,
 * pl_py_eval_call), so no call is ever reported by two backends. */
#include <errno.h>

#include "py.h"

#if PY_VERSION_HEX < 0x030C0000

#include <internal/pycore_interp.h>

#define GEN_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)

_Static_assert(_Alignof(PL_PY_FRAME) > PL_PY_EVAL_BITS, "a frame's low bits are free");

/* Not instrumented by AddressSanitizer: this frame stays on the C stack while the
 * frame runs, and greenlet copies stack slices in and out with memcpy as it switches,
 * which ASan takes for an overflow of this frame's redzones. Without a frame pointer
 * (GCC): it holds one word over _PyEval_EvalFrameDefault, and takes 16 bytes of the C
 * stack per Python call (32 with clang, which keeps the frame pointer). 3.10 makes a C frame per call anyway: with 8 MiB a recursion
 * there reaches 96% of its unprofiled depth (19,375 calls against 20,117), where the
 * 64 bytes this took before, with a hand-over at three quarters of the stack, gave
 * 85%, and the profile function, whose C frame per call cProfile pays too, 81%. */
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
	struct pl_py_eval_run run = pl_py_eval_call(ts, fr, throwflag);
	PyObject *r = _PyEval_EvalFrameDefault(run.ts, (PL_PY_FRAME *)(run.word & ~PL_PY_EVAL_BITS),
					       !!(run.word & PL_PY_EVAL_THROWN));
	return run.word & PL_PY_EVAL_REPORTED ? pl_py_eval_return(run.word, r) : r;
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

#else /* 3.12+: sys.monitoring instead */

int pl_py_evalframe_start(void)
{
	return -ENOTSUP;
}

void pl_py_evalframe_stop(void)
{
}

#endif
