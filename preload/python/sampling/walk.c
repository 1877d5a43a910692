/* walk.c: the Python frames of the thread a tick interrupted, read in its tick handler
 * (the shim's sampler-signal.c calls pl_pys_sample through the adapter's pointer).
 * async-signal-safe: no GIL, no allocation, no lock, no call into Python.
 *
 * The thread state comes from the thread's own TSS slot (PyGILState_GetThisThreadState).
 * The chain is the interrupted thread's own: 3.10's PyFrameObject f_back chain, 3.11+'s
 * _PyInterpreterFrame previous chain. Only this thread links and unlinks its frames, and
 * CPython links a frame once it is built and unlinks it before it clears it (3.11.1+,
 * gh-99729), so a frame on the chain holds its code object. Every frame is still checked
 * before it is read: it must lie in one of the thread's data-stack chunks, inside a live
 * generator, coroutine or frame object, or on the C stack just above the interrupted
 * stack pointer (3.12+'s entry frames); its code object must be a code object. A chain
 * that fails a check is not sampled (the tick counts in `dropped`).
 *
 * Until a frame of the chain is found in a data-stack chunk, a frame outside them is
 * read only once its bytes are known to be readable (probe_ok: a one-byte
 * process_vm_readv of each page), and so is its code object: a greenlet switch (3.11,
 * 3.12) leaves the thread state's cframe pointing into the C stack while greenlet
 * copies another greenlet's saved stack over it, and a tick there found text where the
 * innermost frame's pointer was (SIGSEGV in the gevent RESP server, issue 13). A frame
 * in a chunk is a frame of the thread's own data stack, linked by CPython: the chain
 * from there on is read as before, with no system call. And no frame is read while the
 * thread may be inside greenlet's switch code (in_greenlet): there the innermost
 * frame's pointer may name a freed object, which the probe cannot tell (ASan can).
 *
 * The running asyncio task is the one whose root coroutine is the outermost coroutine
 * frame of the innermost run of coroutine frames (generators between them are the
 * coroutines' own iterators; a plain function's frame ends the run: it drives the
 * coroutines above it, as Task's step does); tasks.c says which context it has. */
/* async-signal-safe */
#include "sampling.h" /* Python.h first */

#include "../greenlet/greenlet.h"

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The reads that tell whether a pointer is a frame (frame_ok, walk) are speculative by
 * design: once the probe has found the bytes readable they may lie outside any object,
 * as when 3.11/3.12's eval loop has made its C-stack _PyCFrame current but not yet set
 * its current_frame, and a tick reads an old pointer left in that stack slot (an
 * object's address: its "frame object header" lies before the object). Such a read is
 * safe and fails the type checks; AddressSanitizer would report it (the achurn test,
 * once in about 40 runs), so these functions are not instrumented, and read an
 * object's type directly (Py_TYPE, an instrumented function when not inlined). */
#define PL_SPECULATIVE __attribute__((no_sanitize_address))
#define PL_TYPE(o) (((const PyObject *)(o))->ob_type)

#define MAX_HOPS 4096		/* frames followed, skipped ones too: a cycle is a bad chain */
#define CSTACK_SPAN (64u << 20) /* how far above sp an entry frame may lie */

static int aligned(const void *p)
{
	return p && ((uintptr_t)p & 7) == 0;
}

/* The outermost frame a walk met (3.11+: that had started; entry frames on the C stack
 * are not frames of a greenlet's own) and its code object; 0 when none. */
struct outer {
	uintptr_t frame, code;
};

#if PY_VERSION_HEX >= 0x030B0000
#define PROBE_PAGE 4096u /* readability is per page; 4 KiB divides every page size */
#define PROBE_CACHE 16	 /* pages found readable in this walk */

/* The pages one walk found readable: the same entry frames and generators come back
 * tick after tick, but the memory may be unmapped between two ticks. */
struct probe {
	pid_t pid;   /* 0: not read yet */
	int trusted; /* a frame of the chain lay in a chunk: the rest is CPython's own */
	unsigned n;
	uintptr_t pages[PROBE_CACHE];
};

/* Nonzero when every byte of [lo, hi) can be read now: each page is read once through
 * the kernel, which says EFAULT where a plain load would fault. */
static int probe_ok(struct probe *p, uintptr_t lo, uintptr_t hi)
{
	if (hi <= lo || lo < PROBE_PAGE)
		return 0;
	for (uintptr_t pg = lo & ~(uintptr_t)(PROBE_PAGE - 1); pg < hi; pg += PROBE_PAGE) {
		unsigned i = 0;
		while (i < p->n && p->pages[i] != pg)
			i++;
		if (i < p->n)
			continue;
		if (!p->pid)
			p->pid = (pid_t)syscall(SYS_getpid);
		char byte;
		struct iovec mine = {&byte, 1}, at = {(void *)(pg > lo ? pg : lo), 1};
		if (syscall(SYS_process_vm_readv, p->pid, &mine, 1ul, &at, 1ul, 0ul) != 1)
			return 0;
		if (p->n < PROBE_CACHE)
			p->pages[p->n++] = pg;
	}
	return 1;
}
#endif

#if PY_VERSION_HEX >= 0x030B0000
/* Nonzero when fr lies in the used part of the thread's data stack: below its top in
 * the newest chunk (a popped frame's memory lies above, stale), anywhere in older ones
 * (a chunk is left only once full). */
static int in_chunks(PyThreadState *ts, const PL_PY_FRAME *fr)
{
	uintptr_t lo = (uintptr_t)fr, hi = lo + offsetof(PL_PY_FRAME, localsplus);
	_PyStackChunk *c = ts->datastack_chunk;
	uintptr_t top = (uintptr_t)ts->datastack_top;
	for (int i = 0; aligned(c) && i < 256; i++, c = c->previous) {
		uintptr_t end = (uintptr_t)c + c->size;
		if (i == 0 && top >= (uintptr_t)c->data && top <= end)
			end = top;
		if (lo >= (uintptr_t)c->data && hi <= end)
			return 1;
	}
	return 0;
}

/* 1 when fr may be read and lies in a data-stack chunk, 2 when it may be read and lies
 * elsewhere (its code object is then probed too), 0 when it may not: see the file's
 * comment. */
PL_SPECULATIVE static int frame_ok(PyThreadState *ts, const PL_PY_FRAME *fr, uintptr_t sp,
				   struct probe *p)
{
	if (!aligned(fr))
		return 0;
	if (in_chunks(ts, fr)) {
		p->trusted = 1;
		return 1;
	}
	/* Not in a chunk: read only what lies before the frame to tell where it is, once
	 * it is known to be readable (unless a frame before it lay in a chunk). */
	uintptr_t at = (uintptr_t)fr, gen_at = at - offsetof(PyGenObject, gi_iframe);
	uintptr_t fo_at = at - offsetof(PyFrameObject, _f_frame_data);
	uintptr_t lo = gen_at < fo_at ? gen_at : fo_at;
	if (lo > at || (!p->trusted && !probe_ok(p, lo, at + offsetof(PL_PY_FRAME, localsplus))))
		return 0;
#if PY_VERSION_HEX >= 0x030C0000
	/* (A thread's stack may lie right below the heap: the owner decides.) */
	if (at > sp && at - sp < CSTACK_SPAN && fr->owner == FRAME_OWNED_BY_CSTACK)
		return 2;
#else
	(void)sp;
#endif
	/* The frame object first: its header lies nearer the frame than a generator's,
	 * so for a frame inside a generator it is a read inside the generator, while the
	 * generator's header of a frame inside a frame object would lie before that
	 * object (ASan saw such a read, 64 bytes left of a frame object, in the achurn
	 * test; next to an unmapped page it would fault). */
	const PyObject *fo = (const PyObject *)fo_at;
	if (PL_TYPE(fo) == &PyFrame_Type)
		return fr->owner == FRAME_OWNED_BY_FRAME_OBJECT ? 2 : 0;
	const PyObject *gen = (const PyObject *)gen_at;
	if (PL_TYPE(gen) == &PyGen_Type || PL_TYPE(gen) == &PyCoro_Type ||
	    PL_TYPE(gen) == &PyAsyncGen_Type)
		return fr->owner == FRAME_OWNED_BY_GENERATOR ? 2 : 0;
	return 0;
}

static PL_PY_FRAME *current_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
	return ts->current_frame;
#else
	_PyCFrame *cf = ts->cframe;
	return aligned(cf) ? cf->current_frame : NULL;
#endif
}

/* 3.11+: walks from the innermost frame. A group of frames ends at an entry frame: the
 * first one a C call of the eval loop ran (3.11: is_entry; 3.12+: the one under an
 * entry shim frame, FRAME_OWNED_BY_CSTACK). A C call that has run no frame yet has an
 * empty group, so groups stay in step with the eval loop's C frames. */
PL_SPECULATIVE static int walk(PyThreadState *ts, struct pl_py_sample *s, PyObject **root,
				struct outer *out)
{
	unsigned n = 0, group = 0;
	int root_done = 0;
	PL_PY_FRAME *fr = current_frame(ts);
#if PY_VERSION_HEX >= 0x030C0000
	/* Entry frames lie ever higher on the C stack: one at or below the last is stale
	 * (a C call of the eval loop that has just begun may not have set its own yet). */
	uintptr_t last_entry = s->sp;
#endif
	struct probe p = {0};
	for (unsigned hops = 0; fr; hops++) {
		int where = hops == MAX_HOPS ? 0 : frame_ok(ts, fr, s->sp, &p);
		if (!where)
			return -1;
		PL_PY_FRAME *back = fr->previous;
#if PY_VERSION_HEX >= 0x030C0000
		if (fr->owner == FRAME_OWNED_BY_CSTACK) {
			if ((uintptr_t)fr <= last_entry)
				return -1;
			last_entry = (uintptr_t)fr;
			if (!s->truncated) {
				if (s->ngroups < PL_PY_SAMPLE_MAX)
					s->groups[s->ngroups++] = (uint16_t)group;
				group = 0;
			}
			fr = back;
			continue;
		}
#endif
#if PY_VERSION_HEX >= 0x030D0000
		PyCodeObject *co = (PyCodeObject *)fr->f_executable;
		_Py_CODEUNIT *at = fr->instr_ptr;
#else
		PyCodeObject *co = fr->f_code;
		_Py_CODEUNIT *at = fr->prev_instr;
#endif
		if (!aligned(co) ||
		    (where == 2 && !p.trusted &&
		     !probe_ok(&p, (uintptr_t)co, (uintptr_t)(co + 1))) ||
		    PL_TYPE(co) != &PyCode_Type)
			return -1;
		if (fr->owner == FRAME_OWNED_BY_GENERATOR) {
			PyObject *gen = (PyObject *)((char *)fr - offsetof(PyGenObject, gi_iframe));
			if (!root_done && PL_TYPE(gen) == &PyCoro_Type) {
				*root = gen;
				s->task_frames = n + 1; /* its key goes at n */
			}
		} else if (*root) {
			root_done = 1;
		}
		/* Not started yet: the frame that makes it is still running. */
		int incomplete = fr->owner != FRAME_OWNED_BY_GENERATOR &&
				 at < _PyCode_CODE(co) + co->_co_firsttraceable;
		if (!incomplete) {
			out->frame = (uintptr_t)fr;
			out->code = (uintptr_t)co;
		}
		if (!incomplete && !s->truncated) {
			if (n == PL_PY_SAMPLE_MAX) {
				/* Followed on without keys, to its outermost frame. */
				s->truncated = 1;
				if (!root_done)
					*root = NULL; /* a coroutine further out may be the root */
				root_done = 1;
				fr = back;
				continue;
			}
			uintptr_t key = pl_pys_key(co);
			if (!key)
				return -1;
			s->keys[n++] = key;
			group++;
		}
#if PY_VERSION_HEX < 0x030C0000
		if (fr->is_entry && !s->truncated) {
			if (s->ngroups < PL_PY_SAMPLE_MAX)
				s->groups[s->ngroups++] = (uint16_t)group;
			group = 0;
		}
#endif
		fr = back;
	}
	if (group && s->ngroups < PL_PY_SAMPLE_MAX)
		s->groups[s->ngroups++] = (uint16_t)group;
	return (int)n;
}
#else /* 3.10: frame objects; each ran in a C call of its own */
static int walk(PyThreadState *ts, struct pl_py_sample *s, PyObject **root, struct outer *out)
{
	unsigned n = 0;
	int root_done = 0;
	PyFrameObject *f = ts->frame;
	for (unsigned hops = 0; f; hops++) {
		if (hops == MAX_HOPS || !aligned(f) || Py_TYPE(f) != &PyFrame_Type)
			return -1;
		out->frame = (uintptr_t)f;
		out->code = (uintptr_t)f->f_code;
		if (n == PL_PY_SAMPLE_MAX) {
			/* Followed on without keys, to its outermost frame. */
			if (!s->truncated && !root_done)
				*root = NULL; /* a coroutine further out may be the root */
			s->truncated = 1;
			f = f->f_back;
			continue;
		}
		PyObject *gen = f->f_gen;
		if (gen && aligned(gen)) {
			if (!root_done && Py_TYPE(gen) == &PyCoro_Type) {
				*root = gen;
				s->task_frames = n + 1;
			}
		} else if (*root) {
			root_done = 1;
		}
		uintptr_t key = pl_pys_key(f->f_code);
		if (!key)
			return -1;
		s->keys[n] = key;
		s->groups[n] = 1;
		n++;
		f = f->f_back;
	}
	s->ngroups = n;
	return (int)n;
}
#endif

#define SWITCH_SCAN 64 /* stack words above sp looked at for a return into greenlet */

/* Nonzero when the thread may be inside a greenlet switch: the pc in greenlet's text,
 * or a return address into it among the innermost stack words (a memcpy of the stack
 * slice, a thread-state lookup greenlet makes before it restores the frames). Until
 * greenlet's PythonState::operator>> has run, 3.11's and 3.12's cframe points at the
 * other greenlet's bytes, which may name a freed object. A stale word in a live frame
 * may match too: that tick's Python frames are then not read (counted). The words
 * lie in the live stack above sp. */
__attribute__((no_sanitize("address"))) static int in_greenlet(const struct pl_py_sample *s)
{
	uintptr_t hi = __atomic_load_n(&pl_py_greenlet_hi, __ATOMIC_ACQUIRE);
	uintptr_t lo = pl_py_greenlet_lo;
	if (!hi)
		return 0;
	if (s->pc - lo < hi - lo)
		return 1;
	const uintptr_t *w = (const uintptr_t *)(s->sp & ~(uintptr_t)7);
	for (unsigned i = 0; w && i < SWITCH_SCAN; i++)
		if (w[i] - lo < hi - lo)
			return 1;
	return 0;
}

int pl_pys_sample(struct pl_py_sample *s)
{
	s->truncated = 0;
	s->ngroups = 0;
	s->ctx = NULL;
	s->task_frames = 0;
	s->new_coro = 0;
	s->new_gen = 0;
	/* Before Python runs or once it finalizes (thread states are freed then, a
	 * daemon thread's among them), the thread's native stack is sampled. */
	if (!Py_IsInitialized() || pl_pys_finalizing())
		return 0;
	PyThreadState *ts = PyGILState_GetThisThreadState();
	if (!aligned(ts))
		return 0;
	if (in_greenlet(s))
		return -1;
	PyObject *root = NULL;
	struct outer out = {0, 0};
	int n = walk(ts, s, &root, &out);
	/* Frames of a greenlet other than the one the sampler charges: greenlet has
	 * restored them, its tracer has not told us yet (greenlet/suspended.c). */
	if (n > 0 && pl_py_greenlet_hi && pl_py_suspended_other(out.frame, out.code, s->cur))
		return -1;
	if (n > 0 && root)
		s->ctx = pl_pys_task_ctx(ts, root, s);
	pl_pys_tasks_tick(ts);
	return n;
}
