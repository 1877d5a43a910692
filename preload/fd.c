/* fd.c: the shim's own file descriptors, owned by identity (fd.h). Adopt and close run
 * on whichever thread makes or drops the descriptor; pl_fd_get also runs in the toggle
 * signal's handler and in _exit, so it only calls fstat. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd.h"

/* Half the descriptor limit at most, so a program with a low limit still has room. */
static int floor_fd(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return PL_FD_FLOOR;
	if (rl.rlim_cur / 2 < PL_FD_FLOOR)
		return (int)(rl.rlim_cur / 2);
	return PL_FD_FLOOR;
}

int pl_fd_adopt(struct pl_fd *f, int fd)
{
	f->fd = -1;
	if (fd < 0)
		return -EBADF;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, floor_fd());
	if (hi >= 0) {
		close(fd);
		fd = hi;
	} else {
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	f->fd = fd;
	return 0;
}

/* async-signal-safe */
int pl_fd_get(const struct pl_fd *f)
{
	int fd = f->fd;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != f->dev || st.st_ino != f->ino)
		return -1;
	return fd;
}

void pl_fd_close(struct pl_fd *f)
{
	int fd = pl_fd_get(f);
	f->fd = -1;
	if (fd >= 0)
		close(fd);
}
