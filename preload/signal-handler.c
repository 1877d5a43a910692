/* signal-handler.c: the toggle signal's handler, the only code of the shim that runs
 * in a signal context. It writes one byte to the control pipe (control.c reads it on
 * the control thread, which starts or stops profiling). Nothing else belongs here. */
#include <errno.h>
#include <unistd.h>

#include "internal.h"

/* The pipe's write end (non-blocking, close-on-exec); none while there is none. */
struct pl_fd pl_toggle_fd = PL_FD_NONE;

/* async-signal-safe: saves errno, writes a byte, restores errno. A full pipe drops the
 * byte, which only loses a toggle nobody has read yet. The byte goes only to the pipe
 * the shim made, never to whatever file now has its number. */
void pl_on_toggle_signal(int sig)
{
	int saved = errno;
	int fd = pl_fd_get(&pl_toggle_fd); /* -1 when the program took the number */
	char byte = 't';
	if (fd >= 0) {
		ssize_t n = write(fd, &byte, 1);
		(void)n;
	}
	errno = saved;
}
