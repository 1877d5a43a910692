/* host.c: what the adapter's files share of the shim and of the process: the struct
 * the shim lent (pl_py_host, set by pl_py_attach), and the generations that tell a
 * file's state it is stale: profiling started or stopped since (pl_py_gen), the
 * process forked since (pl_py_forks). Written by attach.c only. */
#include "py.h"

const struct pl_py_host *pl_py_host;
unsigned pl_py_gen;
unsigned pl_py_forks;
