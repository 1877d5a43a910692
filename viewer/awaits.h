/* awaits.h: who awaited whom (`coprof report --awaits`): the await edges of each file
 * as a forest, each root task (awaited by none) with its critical path. No curses;
 * single-threaded. */
#ifndef VW_AWAITS_H
#define VW_AWAITS_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

enum vw_awaits_format { VW_AWAITS_TEXT, VW_AWAITS_CSV, VW_AWAITS_JSON };

/* Prints the await edges of every file of m to f: the tree under each root task and
 * its critical path (text), one edge a row (CSV), or both (the value of a JSON key).
 * `limit` (0: all) bounds the roots shown. 0 or -ENOMEM. */
int vw_print_awaits(FILE *f, const struct vw_model *m, enum vw_awaits_format fmt, uint64_t limit);

#endif
