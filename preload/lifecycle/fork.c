/* fork.c: the shim's handlers around fork(2), registered by the constructor. The parent
 * holds the control lock and the symbolizer's across the fork, so the child never
 * inherits one taken halfway; the child forgets what belonged to the parent (its
 * profiler, pipe, control thread, keeper) and starts its own (control.c). Run in the
 * forking thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "lifecycle.h"

static void fork_prepare(void)
{
	pl_creds_fork_prepare();
	pl_control_fork_prepare();
	if (pl_syms)
		pl_symbols_lock(pl_syms);
}

static void fork_parent(void)
{
	if (pl_syms)
		pl_symbols_unlock(pl_syms);
	pl_control_fork_parent();
}

static void fork_child(void)
{
	if (pl_syms)
		pl_symbols_unlock(pl_syms);
	pl_sig_after_fork_child();
	pl_creds_fork_child();
	pl_tls_data.thread = NULL;
	pl_pid = getpid();
	pl_control_fork_child();
}

void pl_fork_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
