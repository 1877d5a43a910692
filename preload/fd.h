/* fd.h: the shim's own file descriptors, owned by identity rather than by number.
 *
 * A program may close every descriptor it does not know (a daemon's close-all loop,
 * close_range) and reuse the numbers. So the shim keeps its descriptors at high numbers,
 * close-on-exec, remembers the device and inode each one was opened on, and before it
 * writes, reads or closes one checks that the number still names that object. */
#ifndef PL_FD_H
#define PL_FD_H

#include <signal.h>
#include <sys/types.h>

#define PL_FD_FLOOR 512 /* the lowest number the shim asks for (less under a low limit) */

struct pl_fd {
	volatile sig_atomic_t fd; /* -1: none */
	dev_t dev;		  /* what fstat said when the shim took it */
	ino_t ino;
};
#define PL_FD_NONE                                                                                 \
	{                                                                                          \
		.fd = -1                                                                           \
	}

/* Takes `fd`, just opened by the shim: moves it to a free number at or above the floor
 * (close-on-exec) and records what it is. The original number is closed. On failure to
 * move it, the original number is kept. 0 or -errno (then `fd` is closed and f is
 * none). Not for signal handlers. */
__attribute__((visibility("hidden"))) int pl_fd_adopt(struct pl_fd *f, int fd);

/* async-signal-safe: f's number while it still names the object adopted, else -1. */
__attribute__((visibility("hidden"))) int pl_fd_get(const struct pl_fd *f);

/* Closes f's number only if it still names the object adopted (in a forked child too:
 * a number the program reused is never closed); f is none afterwards. */
__attribute__((visibility("hidden"))) void pl_fd_close(struct pl_fd *f);

/* async-signal-safe: 0 when a number of libunwind's address-check pipe now names the
 * program's object (libunwind would read, write or close it): walk no stack then. */
__attribute__((visibility("hidden"))) int pl_fd_unw_pipe_safe(void);

#endif
