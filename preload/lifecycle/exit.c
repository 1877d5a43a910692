/* exit.c: dumps when a process leaves through _exit(2) instead of exit(3), as
 * multiprocessing's children and os._exit() do: exit(3) runs the shim's destructor,
 * _exit does not. Runs on whichever thread calls _exit, maybe inside a signal handler
 * or a vfork child, so this thread does nothing but async-signal-safe work: in the
 * process the shim's state belongs to, outside the shim's own code, it asks the control
 * thread for the dump and waits a few seconds at most (control.c). */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "lifecycle.h"

static void exit_dump(void)
{
	if (!pl_active || pl_tls_data.guard || pl_ntls.dead || getpid() != pl_pid)
		return;
	pl_tls_data.guard = 1;
	pl_control_quick_exit();
}

static __attribute__((noreturn)) void leave(int status)
{
	if (pl_real.exit_)
		pl_real.exit_(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

PL_EXPORT void _exit(int status)
{
	exit_dump();
	leave(status);
}

PL_EXPORT void _Exit(int status)
{
	exit_dump();
	leave(status);
}
