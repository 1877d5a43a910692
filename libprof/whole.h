/* whole.h: the whole-program tree. A coprof profile has many roots (the main stack of
 * each thread, each task's root coroutine: DESIGN rule 8); tools that draw one tree
 * from one root (snakeviz, gprof2dot) need them joined. cp_whole_program adds
 * synthetic functions that do so; the writer puts them in the pstats dict, the reader
 * takes them out again, and the viewer's tree view starts at the same root. */
#ifndef CP_WHOLE_H
#define CP_WHOLE_H

#include "profile.h"

/* Names of the synthetic functions; keys are ("~", 0, name), as cProfile keys builtins,
 * so pstats prints them as {whole program}, {thread main 1234}, {tasks: worker ×8} (the
 * tasks of one root coroutine), {task worker-3} (a task alone of its kind); a name taken
 * twice gets a number ({task Task-1 2}). */
#define CP_WHOLE_ROOT_WHAT "whole program"
#define CP_WHOLE_ROOT "<" CP_WHOLE_ROOT_WHAT ">"

/* At most this many nodes of tasks are drawn (the largest first); the others share one
 * "<N more tasks>" node, so that a server with 10,000 kinds of task stays readable. */
#define CP_WHOLE_MAX_TASKS 200

/* The calls of function `i` of `s` that no caller in `s` made (its root activations):
 * its numbers minus its callers' edges (ct: minus the edges of other callers, since
 * a recursive call's ct is already in the outermost one's). Clamped at zero. */
struct cp_stat cp_root_part(const struct cp_stats *s, uint32_t i);

/* 1 when `part` (from cp_root_part) says function i of s is a root of s. */
int cp_is_root(const struct cp_stats *s, uint32_t i, const struct cp_stat *part);

/* Builds into `out` (allocated in `a`) a copy of `s` (p's top-level stats with unique
 * keys; p gives the task and thread tables) followed by synthetic functions:
 * out->funcs[s->nfuncs] is the root, "<whole program>", the one function of `out`
 * nobody calls; then one node per kind of task (tasks whose heaviest root is the same
 * function of `s`; the largest CP_WHOLE_MAX_TASKS, the rest sharing one), with edges to
 * its tasks' roots, and one per thread, with edges to its
 * own stack's roots (cp_thread.roots). Root calls no node accounts for (a file without
 * the tables, a thread without roots) hang from the only thread's node, else from the
 * root. A table never places more root calls than `s` leaves (a hand-made file may
 * claim more). A node's ct is the sum of its edges' ct; its tt is 0 and it counts one
 * call, so the total of tt (pstats' "in X seconds") is unchanged. Under wall, tasks
 * overlap each other and their thread, so the root's ct is a sum of overlapping
 * times, larger than the run. 0 or -ENOMEM. */
int cp_whole_program(const struct cp_profile *p, const struct cp_stats *s, struct cp_arena *a,
		     struct cp_stats *out);

#endif
