/* publish.c: a file made whole or not at all: written under a temporary name in its
 * directory, synced, then renamed over the target (coprof-private.h). The engine's
 * writer (pstat-write.c) publishes each dump so, on the dumping thread, and so does
 * coprof-keeper (preload/keeper/keeper.c) for a process that can no longer write its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coprof-private.h"

/* 0 when a thing of this mode is a regular file, which a dump replaces; else why it is
 * left alone: -EISDIR or a COPROF_E* code. */
static int target_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return 0;
	if (S_ISDIR(mode))
		return -EISDIR;
	if (S_ISFIFO(mode))
		return COPROF_EFIFO;
	if (S_ISSOCK(mode))
		return COPROF_ESOCKET;
	return COPROF_EDEVICE;
}

/* Where a profile may go. Nothing, or a regular file, is replaced. A symbolic link to
 * a regular file is written through when `follow` (as cProfile and gperftools write
 * through links: the file it names is replaced and the link stays), and refused
 * otherwise. Anything else (a device, a FIFO, a socket, a directory, a link to one of
 * them or to nothing) is never replaced: the rename would put a regular file in its
 * place, which for /dev/null breaks the machine. Puts the path to rename onto in
 * `target` (PATH_MAX bytes). Returns 0, -EISDIR, a COPROF_E* code or -errno (what
 * lstat said, as the OS says it). A thing made at `path` between this check and the
 * rename is still replaced: the check is against mistakes in COPROF_OUT, not against
 * another process racing us. */
static int check_target(const struct cp_publish *p, char target[PATH_MAX])
{
	struct stat st;
	size_t n = strlen(p->path);

	if (p->path[n - 1] == '/')
		return -EISDIR;
	if (n >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(target, p->path, n + 1);
	if (fstatat(p->dirfd, p->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		if (!p->follow)
			return COPROF_ENOFOLLOW;
		if (fstatat(p->dirfd, p->path, &st, 0) < 0 || !S_ISREG(st.st_mode))
			return COPROF_ELINK;
		return realpath(p->path, target) ? 0 : -errno;
	}
	return target_kind(st.st_mode);
}

/* The temporary name next to `target`: "NAME.tmp.PID.TAGN", with NAME shortened so
 * that the last component stays within NAME_MAX (a target whose own name fits must not
 * fail for its temporary's sake). */
static int temp_name(const struct cp_publish *p, const char *target, unsigned serial,
		     char tmp[PATH_MAX])
{
	const char *slash = strrchr(target, '/');
	int dirlen = slash ? (int)(slash - target + 1) : 0;
	char suffix[48];
	int sl =
	    snprintf(suffix, sizeof(suffix), ".tmp.%ld.%s%u", p->pid, p->tag ? p->tag : "", serial);
	int base = (int)strlen(target + dirlen);
	if (base > NAME_MAX - sl)
		base = NAME_MAX - sl;
	int n =
	    snprintf(tmp, PATH_MAX, "%.*s%.*s%s", dirlen, target, base, target + dirlen, suffix);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Makes the rename durable; a failure here does not lose the file, so it is ignored. */
static void sync_dir(const struct cp_publish *p, const char *target)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(target, '/');

	if (p->dirfd != AT_FDCWD) {
		fsync(p->dirfd);
		return;
	}
	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == target) {
		strcpy(dir, "/");
	} else {
		if ((size_t)(slash - target) >= sizeof(dir))
			return;
		memcpy(dir, target, (size_t)(slash - target));
		dir[slash - target] = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int cp_publish(const struct cp_publish *p)
{
	static unsigned counter;
	char tmp[PATH_MAX], target[PATH_MAX];
	int fd = -1, err = 0;
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (p->follow ? 0 : O_NOFOLLOW);

	if (!p->path || !*p->path || !p->fill)
		return -EINVAL;
	if ((err = check_target(p, target)) != 0)
		return err;
	for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
		if ((err = temp_name(p, target, __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED),
				     tmp)) != 0)
			return err;
		fd = openat(p->dirfd, tmp, flags, 0666);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	err = p->fill(p->arg, fd);
	/* A writer that may not give the file away (not root) leaves it its own. */
	if (err == 0 && p->chown && fchown(fd, p->uid, p->gid) != 0 && errno != EPERM)
		err = -errno;
	if (err == 0 && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && err == 0)
		err = -errno;
	if (err == 0 && renameat(p->dirfd, tmp, p->dirfd, target) < 0)
		err = -errno;
	if (err) {
		unlinkat(p->dirfd, tmp, 0);
		return err;
	}
	sync_dir(p, target);
	return 0;
}
