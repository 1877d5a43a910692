/* creds.h: processes that change their credentials (creds.c), and the dumps they can
 * no longer write themselves (through coprof-keeper, keeper.c). */
#ifndef PL_CREDS_H
#define PL_CREDS_H

#include "shim.h"

/* At start (the constructor): finds coprof-keeper next to the shim. */
PL_HIDDEN void pl_creds_init(void);

/* Writes dump number `n` (`child`: of a forked child) of pl_prof to `path`, as
 * coprof_dump (coprof_dump_clear with `clear`) does; through the keeper when this
 * process changed its credentials and can no longer write the directory. Same
 * returns. Called under control.c's lock. */
PL_HIDDEN int pl_creds_dump(const char *path, unsigned n, int child, int clear);

/* Removes dump number `n` at `path` (COPROF_KEEP), through the keeper when needed.
 * 0 (also when there was nothing), -errno. */
PL_HIDDEN int pl_creds_remove(const char *path, unsigned n, int child);

/* In the parent, just before fork: whether it takes orphans, for the child. */
PL_HIDDEN void pl_creds_fork_prepare(void);

/* In a forked child, right after fork. */
PL_HIDDEN void pl_creds_fork_child(void);

/* control.c: the shim's threads stop around a credential change and start again from
 * the thread that made it. */
PL_HIDDEN void pl_control_threads_pause(void);
PL_HIDDEN void pl_control_threads_resume(void);

#endif
