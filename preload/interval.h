/* interval.h: periodic windows (COPROF_INTERVAL, COPROF_KEEP), driven by the control
 * thread (control.c), always under its lock. */
#ifndef PL_INTERVAL_H
#define PL_INTERVAL_H

#include <stdint.h>

#include "shim.h"

/* Profiling started (a window opens now) or stopped (no window is open). */
PL_HIDDEN void pl_interval_open(void);
PL_HIDDEN void pl_interval_close(void);

/* How long the control thread may wait for a toggle before the open window is due:
 * milliseconds for poll(2); -1 (forever) without COPROF_INTERVAL; one interval when
 * no window is open. */
PL_HIDDEN int pl_interval_wait_ms(void);

/* The open window is due: writes it as dump number `n` of this process (`child`: a
 * forked child, for the file name) through coprof_dump_clear, so recording goes on
 * into the next window with nothing lost between them, and opens the next window.
 * Returns 1 when a file was written (the number is used), 0 otherwise (not due, no
 * event in the window, or an error, said once on stderr with the OS's reason). */
PL_HIDDEN int pl_interval_write_due(unsigned n, int child);

/* After dump number `n` was written: with COPROF_KEEP=K, removes dump number n - K,
 * so only the newest K files stay. */
PL_HIDDEN void pl_interval_keep(unsigned n, int child);

#endif
