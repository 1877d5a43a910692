/* greenlet.h: the greenlet adapter's table of switched-out greenlets (suspended.c),
 * which greenlet.c writes and the tick handler reads (sampling/walk.c). The adapter's
 * other greenlet entry points are in ../py.h, beside the hook that calls them. */
#ifndef PL_PY_GREENLET_H
#define PL_PY_GREENLET_H

#include "../py.h"

/* Records that the greenlet whose context is ctx (NULL: a thread's main greenlet) is
 * switched out, its frames' outermost one `frame`, running code object `code`. GIL
 * held. 0, or -ENOSPC when the table is full (said once on stderr): ticks in that
 * greenlet's switch windows are then sampled as before. */
PL_PY_HIDDEN int pl_py_suspended_put(uintptr_t frame, uintptr_t code,
				     const struct coprof_ctx *ctx);
/* The greenlet whose outermost frame is `frame` runs again, or died. GIL held. */
PL_PY_HIDDEN void pl_py_suspended_del(uintptr_t frame);
/* Nonzero when `frame`, running `code`, is recorded as the outermost frame of a
 * switched-out greenlet whose context is not cur: a tick whose chain ends there landed
 * between greenlet's restoring of that greenlet's frames and the tracer that says it
 * runs. Any thread, in its tick handler: async-signal-safe, lock-free; an entry torn
 * or rewritten meanwhile reads as none. */
PL_PY_HIDDEN int pl_py_suspended_other(uintptr_t frame, uintptr_t code,
				       const struct coprof_ctx *cur);

#endif
