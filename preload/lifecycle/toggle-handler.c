/* toggle-handler.c: the toggle signal's handler, the only code of the shim that runs
 * in a signal context. It writes one byte to the control pipe (control.c reads it on
 * the control thread, which starts or stops profiling). Nothing else belongs here. */
#include <errno.h>
#include <unistd.h>

#include "lifecycle.h"

/* The pipe's write end (non-blocking, close-on-exec); none while there is none. */
struct pl_fd pl_toggle_fd = PL_FD_NONE;

/* async-signal-safe: saves errno, writes a byte, restores errno. A request queued by
 * `coprof toggle --start/--stop` (sigqueue, state.h) gives 's' or 'p'; anything
 * else (kill -USR2) is a toggle, 't'. A full pipe drops the byte, which only loses a
 * toggle nobody has read yet. */
void pl_on_toggle_signal(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	int saved = errno;
	int fd = pl_fd_get(&pl_toggle_fd); /* -1 when the program took the number */
	char byte = 't';
	if (si && si->si_code == SI_QUEUE && si->si_value.sival_int == PL_REQ_START)
		byte = 's';
	else if (si && si->si_code == SI_QUEUE && si->si_value.sival_int == PL_REQ_STOP)
		byte = 'p';
	if (fd >= 0) {
		ssize_t n = write(fd, &byte, 1);
		(void)n;
	}
	errno = saved;
}
