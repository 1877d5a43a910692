/* export-pprof.h: `coprof export --format pprof` (export-pprof.c). */
#ifndef VW_EXPORT_PPROF_H
#define VW_EXPORT_PPROF_H

#include <stdio.h>

#include "model.h"

/* Writes the model as a gzipped pprof profile.proto to `f`. Sampled files give one
 * sample per stack (values: samples, ns on the file's clock; labels thread,
 * thread_name, task, task_id, waiting); traced files give caller;callee pairs and own
 * times per task (export-traced.h), labelled alike, and say so on stderr and in the
 * profile's comments. When a file measured stalls, two more types (stalls, stall_time)
 * hold one sample per stall, labelled stall=true and stall_length. Files must be all
 * sampled or all traced. Prints its own error line; 0 or -errno (-EIO: a write
 * failed, errno tells why). */
int vw_export_pprof(FILE *f, const struct vw_model *m);

#endif
