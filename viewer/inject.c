/* inject.c: `coprof attach`'s loader: makes one thread of a running process dlopen the
 * shim and call its attach entry, with ptrace, through the trampoline of
 * inject-x86_64.S. The process's files are read through /proc/PID/root (its own mount
 * namespace) and its memory through /proc/PID/mem. One thread is stopped at a time,
 * with PTRACE_SEIZE and PTRACE_INTERRUPT (no signal is sent), and only at a point where
 * it holds no lock of the C library or the loader; it is never left in a state that is
 * wrong to resume, so that coprof may die at any instant (see vw_inject). */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

_Static_assert(offsetof(struct vw_tramp_block, rsp) == VW_B_RSP, "block layout");
_Static_assert(offsetof(struct vw_tramp_block, rip) == VW_B_RIP, "block layout");
_Static_assert(offsetof(struct vw_tramp_block, rflags) == VW_B_FLAGS, "block layout");
_Static_assert(offsetof(struct vw_tramp_block, dlopen) == VW_B_DLOPEN, "block layout");
_Static_assert(offsetof(struct vw_tramp_block, opts) == VW_B_OPTS, "block layout");
_Static_assert(sizeof(struct vw_tramp_block) == VW_B_SIZE, "block layout");

extern const char vw_tramp_start[], vw_tramp_end[];

#define PAGE 4096u
#define SAFE_WAIT_S 2.0 /* how long to look for a thread at a safe point */
/* The kernel's restart codes, which a system call interrupted by a stop returns. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

struct map {
	uint64_t lo, hi, off;
	char perms[5];
	char path[PATH_MAX];
};

struct maps {
	struct map *v;
	size_t n;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Tests only: COPROF_ATTACH_TEST_DIE=N kills this process at the Nth step it reaches,
 * counted over every thread it stops (each stop: 1 seized, 2 stopped, 3 trampoline
 * written, 4 registers set), to show that the target survives coprof's death at each. */
static void test_die(int step)
{
	static int reached;
	const char *v = getenv("COPROF_ATTACH_TEST_DIE");
	(void)step;
	if (v && atoi(v) == ++reached)
		raise(SIGKILL);
}

static int read_maps(pid_t pid, struct maps *m)
{
	char path[64], line[PATH_MAX + 256];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t cap = 0;
	m->v = NULL;
	m->n = 0;
	while (fgets(line, sizeof(line), f)) {
		struct map e = {0};
		int at = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &e.lo, &e.hi, e.perms, &e.off, &at) <
		    4)
			continue;
		if (at > 0) {
			snprintf(e.path, sizeof(e.path), "%s", line + at);
			e.path[strcspn(e.path, "\n")] = 0;
		}
		if (m->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct map *v = realloc(m->v, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				free(m->v);
				return -ENOMEM;
			}
			m->v = v;
		}
		m->v[m->n++] = e;
	}
	fclose(f);
	return 0;
}

/* The first mapping of a file whose path ends with `suffix` (a "/" before it). */
static const struct map *find_file(const struct maps *m, const char *suffix)
{
	size_t sl = strlen(suffix);
	for (size_t i = 0; i < m->n; i++) {
		size_t pl = strlen(m->v[i].path);
		if (pl > sl && m->v[i].path[pl - sl - 1] == '/' &&
		    !strcmp(m->v[i].path + pl - sl, suffix))
			return &m->v[i];
	}
	return NULL;
}

/* An ELF file of the target, read through its root. */
struct elf {
	int fd;
	Elf64_Ehdr eh;
	Elf64_Phdr *ph;
	uint64_t bias; /* where it is loaded, minus its addresses */
};

static void elf_close(struct elf *e)
{
	free(e->ph);
	if (e->fd >= 0)
		close(e->fd);
}

static int read_at(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* Opens the file of mapping `m` and finds its load bias from the mapping of its
 * executable segment (that path, executable, at that segment's offset): not from the
 * lowest mapping of the path at offset 0, which may be another map of the same file
 * (libdw's private map of it, which the shim's symbolizer makes: an attached shim read
 * through it its output template as garbage). A file without an executable segment
 * takes the lowest mapping at offset 0. */
static int elf_open(pid_t pid, const struct maps *all, const struct map *m, struct elf *e)
{
	char path[PATH_MAX + 64];
	memset(e, 0, sizeof(*e));
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, m->path);
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	int rc = read_at(e->fd, &e->eh, sizeof(e->eh), 0);
	if (rc == 0 &&
	    (memcmp(e->eh.e_ident, ELFMAG, SELFMAG) || e->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	     e->eh.e_phentsize != sizeof(Elf64_Phdr)))
		rc = -ENOEXEC;
	if (rc == 0 && !(e->ph = calloc(e->eh.e_phnum, sizeof(Elf64_Phdr))))
		rc = -ENOMEM;
	if (rc == 0)
		rc =
		    read_at(e->fd, e->ph, e->eh.e_phnum * sizeof(Elf64_Phdr), (off_t)e->eh.e_phoff);
	uint64_t first = UINT64_MAX, lo = 0, xoff = 0;
	int exec = 0;
	for (int i = 0; rc == 0 && i < e->eh.e_phnum; i++)
		if (e->ph[i].p_type == PT_LOAD && !exec && (e->ph[i].p_flags & PF_X)) {
			exec = 1;
			first = e->ph[i].p_vaddr & ~(uint64_t)(PAGE - 1);
			xoff = e->ph[i].p_offset & ~(uint64_t)(PAGE - 1);
		}
	for (int i = 0; rc == 0 && !exec && i < e->eh.e_phnum; i++)
		if (e->ph[i].p_type == PT_LOAD && e->ph[i].p_vaddr < first)
			first = e->ph[i].p_vaddr & ~(uint64_t)(PAGE - 1);
	for (size_t i = 0; rc == 0 && i < all->n; i++)
		if (!strcmp(all->v[i].path, m->path) &&
		    (exec ? all->v[i].perms[2] == 'x' && all->v[i].off == xoff : all->v[i].off == 0) &&
		    (!lo || all->v[i].lo < lo))
			lo = all->v[i].lo;
	if (rc == 0 && (first == UINT64_MAX || !lo))
		rc = -ENOEXEC;
	if (rc != 0) {
		elf_close(e);
		return rc;
	}
	e->bias = lo - first;
	return 0;
}

/* The address of dynamic symbol `name` (defined; its default version first). */
/* The address of the dynamic symbol `name` that `e` defines (its default version);
 * with `undef`, 0 when `e` has it undefined (imports it), and *addr is untouched. */
static int elf_symbol_ex(struct elf *e, const char *name, int undef, uint64_t *addr)
{
	Elf64_Shdr *sh = calloc(e->eh.e_shnum, sizeof(*sh));
	if (!sh || e->eh.e_shentsize != sizeof(*sh) ||
	    read_at(e->fd, sh, e->eh.e_shnum * sizeof(*sh), (off_t)e->eh.e_shoff) != 0) {
		free(sh);
		return -ENOEXEC;
	}
	int rc = -ENOENT;
	Elf64_Sym *syms = NULL;
	char *str = NULL;
	uint16_t *ver = NULL;
	size_t nsym = 0;
	for (int i = 0; i < e->eh.e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= e->eh.e_shnum)
			continue;
		const Elf64_Shdr *s = &sh[sh[i].sh_link];
		nsym = sh[i].sh_size / sizeof(Elf64_Sym);
		syms = malloc(sh[i].sh_size);
		str = malloc(s->sh_size + 1);
		if (!syms || !str || read_at(e->fd, syms, sh[i].sh_size, (off_t)sh[i].sh_offset) ||
		    read_at(e->fd, str, s->sh_size, (off_t)s->sh_offset)) {
			nsym = 0;
			break;
		}
		str[s->sh_size] = 0;
		for (int j = 0; j < e->eh.e_shnum; j++)
			if (sh[j].sh_type == SHT_GNU_versym && sh[j].sh_size == nsym * 2 &&
			    (ver = malloc(sh[j].sh_size)) &&
			    read_at(e->fd, ver, sh[j].sh_size, (off_t)sh[j].sh_offset)) {
				free(ver);
				ver = NULL;
			}
		for (size_t k = 0; k < nsym; k++) {
			const Elf64_Sym *y = &syms[k];
			if ((y->st_shndx == SHN_UNDEF) != undef || y->st_name > s->sh_size ||
			    strcmp(str + y->st_name, name))
				continue;
			rc = 0;
			if (undef)
				break;
			*addr = e->bias + y->st_value;
			if (!ver || !(ver[k] & 0x8000)) /* the default version */
				break;
		}
		break;
	}
	free(ver);
	free(str);
	free(syms);
	free(sh);
	return rc;
}

static int elf_symbol(struct elf *e, const char *name, uint64_t *addr)
{
	return elf_symbol_ex(e, name, 0, addr);
}

int vw_remote_imports(pid_t pid, const char *name)
{
	struct maps m;
	if (read_maps(pid, &m) != 0)
		return 0;
	int found = 0;
	for (size_t i = 0; !found && i < m.n; i++) {
		/* each file once: at its first mapping (offset 0, where its ELF header is) */
		struct elf e;
		uint64_t unused;
		if (m.v[i].path[0] != '/' || m.v[i].off != 0 || elf_open(pid, &m, &m.v[i], &e) != 0)
			continue;
		found = elf_symbol_ex(&e, name, 1, &unused) == 0;
		elf_close(&e);
	}
	free(m.v);
	return found;
}

int vw_remote_symbol(pid_t pid, const char *suffix, const char *name, uint64_t *addr)
{
	struct maps m;
	int rc = read_maps(pid, &m);
	if (rc != 0)
		return rc;
	const struct map *f = find_file(&m, suffix);
	struct elf e;
	rc = f ? elf_open(pid, &m, f, &e) : -ENOENT;
	if (rc == 0) {
		rc = elf_symbol(&e, name, addr);
		elf_close(&e);
	}
	free(m.v);
	return rc;
}

/* /proc/PID/mem opened with `flags`: an fd, or -errno. */
static int open_mem(pid_t pid, int flags)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int vw_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	int fd = open_mem(pid, O_RDONLY);
	if (fd < 0)
		return fd;
	int rc = read_at(fd, buf, len, (off_t)addr);
	close(fd);
	return rc;
}

int vw_remote_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	int fd = open_mem(pid, O_WRONLY);
	if (fd < 0)
		return fd;
	ssize_t n = pwrite(fd, buf, len, (off_t)addr);
	int rc = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

/* Where the trampoline may go: `need` bytes of the zero padding after an executable
 * segment (past p_vaddr + p_memsz, up to its last page's end), which the file maps but
 * nothing runs or reads. A write through /proc/PID/mem makes that page a private copy.
 * The bytes are checked to be zero in the target. 0 and *at, or -ENOSPC. */
static int find_room(pid_t pid, int memfd, const struct maps *m, size_t need, uint64_t *at)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct map *x = &m->v[i];
		if (x->perms[2] != 'x' || x->path[0] != '/')
			continue;
		struct elf e;
		if (elf_open(pid, m, x, &e) != 0)
			continue;
		int found = 0;
		for (int k = 0; k < e.eh.e_phnum && !found; k++) {
			const Elf64_Phdr *p = &e.ph[k];
			if (p->p_type != PT_LOAD || !(p->p_flags & PF_X))
				continue;
			uint64_t end = (e.bias + p->p_vaddr + p->p_memsz + 15) & ~15ull;
			uint64_t page_end = (end + PAGE - 1) & ~(uint64_t)(PAGE - 1);
			if (end < x->lo || page_end > x->hi || page_end - end < need)
				continue;
			char buf[PAGE];
			if (read_at(memfd, buf, need, (off_t)end) != 0)
				continue;
			size_t z = 0;
			while (z < need && !buf[z])
				z++;
			if (z == need) {
				*at = end;
				found = 1;
			}
		}
		elf_close(&e);
		if (found)
			return 0;
	}
	return -ENOSPC;
}

/* System calls a thread blocks in while it holds no lock of the C library or the
 * loader, when the program made them (stack_safe checks which function of the C
 * library's it called): the thread may run the loader there. Anything else (malloc's
 * mmap, a write under stdio's lock...) may hold one. futex is not here: a thread waits
 * in it for a lock while it may hold another; it is tried last (rank_of). */
static int idle_syscall(long nr)
{
	switch (nr) {
	case SYS_read:
	case SYS_readv:
	case SYS_pread64:
	case SYS_poll:
	case SYS_ppoll:
	case SYS_select:
	case SYS_pselect6:
	case SYS_pause:
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_accept:
	case SYS_accept4:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_wait4:
	case SYS_waitid:
	case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait:
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
	case SYS_restart_syscall: /* a sleep of those above, restarted after a stop */
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
		return 1;
	default:
		return 0;
	}
}

/* Lower is tried first: a thread in an idle system call, the main thread first; then
 * one waiting in futex; then one running (stopped where it is, taken only outside the
 * C library and the loader). */
static int rank_of(pid_t pid, pid_t tid)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 100;
	char *got = fgets(buf, sizeof(buf), f);
	fclose(f);
	int main = tid == pid ? 0 : 1;
	if (!got || !strncmp(buf, "running", 7))
		return 4 + main;
	long nr = strtol(buf, NULL, 10);
	if (nr >= 0 && idle_syscall(nr))
		return main;
	if (nr == SYS_futex)
		return 2 + main;
	return 4 + main;
}

/* The process's threads, best first. */
static int list_threads(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	int n = 0, ranks[256];
	if (max > 256)
		max = 256;
	struct dirent **names;
	int k = scandir(path, &names, NULL, NULL);
	if (k < 0)
		return -errno;
	for (int i = 0; i < k; i++) {
		long t = strtol(names[i]->d_name, NULL, 10);
		if (t > 0 && n < max) {
			tids[n] = (pid_t)t;
			ranks[n] = rank_of(pid, (pid_t)t);
			/* insertion: by rank, then as listed */
			for (int j = n; j > 0 && ranks[j] < ranks[j - 1]; j--) {
				int r = ranks[j];
				pid_t x = tids[j];
				ranks[j] = ranks[j - 1], tids[j] = tids[j - 1];
				ranks[j - 1] = r, tids[j - 1] = x;
			}
			n++;
		}
		free(names[i]);
	}
	free(names);
	return n;
}

/* Is the file at `path` the C library, the loader or an allocator that replaces
 * malloc (by its name)? */
static int locking_object(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	static const char *const locking[] = {
	    "libc.so",
	    "libc-",
	    "ld-linux",
	    "libpthread",
	    "libdl",
	    /* allocators the program may put in malloc's place */
	    "libjemalloc",
	    "libtcmalloc",
	    "libmimalloc",
	};
	for (size_t k = 0; k < sizeof(locking) / sizeof(locking[0]); k++)
		if (!strncmp(base, locking[k], strlen(locking[k])))
			return 1;
	return 0;
}

/* In the C library, the loader or an allocator: a thread stopped there (not in an
 * idle system call) may hold one of their locks, which dlopen takes again. */
static int in_libc(const struct maps *m, uint64_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (pc >= m->v[i].lo && pc < m->v[i].hi)
			return locking_object(m->v[i].path);
	return 0;
}

/* Waits for thread `tid`'s stop after PTRACE_INTERRUPT. A signal that reaches it
 * first is handed on (PTRACE_CONT with it), and the wait goes on. 0 stopped, -ESRCH
 * the thread is gone, -EAGAIN a group stop (the process is being stopped). */
static int wait_stop(pid_t tid)
{
	for (int i = 0; i < 64; i++) {
		int status;
		if (waitpid(tid, &status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -ESRCH;
		if (!WIFSTOPPED(status))
			continue;
		int sig = WSTOPSIG(status);
		if (status >> 16 == PTRACE_EVENT_STOP)
			return sig == SIGTRAP ? 0 : -EAGAIN;
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
	}
	return -EAGAIN;
}

/* The target's files for libdwfl, through its root (its own mount namespace); else
 * as libdwfl finds them (from memory for a file gone). The viewer runs one look at a
 * time. */
static pid_t look_pid;

static int look_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			 char **file_name, Elf **elfp)
{
	if (name && name[0] == '/') {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)look_pid, name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && (*file_name = strdup(path)) != NULL)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

/* No separate debug files: the names that matter are those the C library exports. */
static int look_no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			     Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			     GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks look_callbacks = {
    .find_elf = look_find_elf,
    .find_debuginfo = look_no_debuginfo,
};

/* Reads an object's CFI (and the C library's symbols) now, not while a thread is
 * stopped: libdwfl reads them at their first use. */
static int look_warm(Dwfl_Module *m, void **userdata, const char *name, Dwarf_Addr start,
		     void *arg)
{
	(void)userdata, (void)start, (void)arg;
	Dwarf_Addr bias;
	(void)dwfl_module_eh_cfi(m, &bias);
	const char *base = strrchr(name, '/');
	if (!strncmp(base ? base + 1 : name, "libc.so", 7))
		(void)dwfl_module_getsymtab(m);
	return DWARF_CB_OK;
}

/* The process's objects as they are now, for unwinding its stopped threads; NULL when
 * libdwfl cannot. */
static Dwfl *look_open(pid_t pid)
{
	Dwfl *d = dwfl_begin(&look_callbacks);
	look_pid = pid;
	if (d && (dwfl_linux_proc_report(d, pid) != 0 || dwfl_report_end(d, NULL, NULL) != 0 ||
		  dwfl_linux_proc_attach(d, pid, true) != 0)) {
		dwfl_end(d);
		return NULL;
	}
	if (d)
		dwfl_getmodules(d, look_warm, NULL, 0);
	return d;
}

/* A function of the C library's that a thread may block in (a system call, or a
 * futex) while it holds a lock that the trampoline's dlopen or the shim's entries take
 * on the same thread: pthread_getattr_np holds the thread's own lock while it reads
 * /proc/self/maps (for the main thread), and the shim's entries read their thread's
 * stack with it; malloc's family holds an arena's lock. `name` as the C library names
 * it (__libc_malloc, __pthread_getattr_np). */
static int holds_lock(const char *name)
{
	static const char *const holding[] = {
	    "pthread_getattr_np", "malloc",	 "calloc",	  "realloc",   "reallocarray",
	    "free",		  "memalign",	 "posix_memalign", "aligned_alloc", "valloc",
	    "pvalloc",		  "malloc_trim", "malloc_stats",   "malloc_info",	"mallinfo",
	    "mallinfo2",
	};
	if (!strncmp(name, "__GI_", 5))
		name += 5;
	while (*name == '_')
		name++;
	if (!strncmp(name, "libc_", 5))
		name += 5;
	for (size_t k = 0; k < sizeof(holding) / sizeof(holding[0]); k++)
		if (!strcmp(name, holding[k]))
			return 1;
	return 0;
}

/* The kinds of objects a stopped thread's frames are in. */
enum look_obj { LOOK_OTHER, LOOK_LIBC, LOOK_LOADER, LOOK_ALLOC, LOOK_SHIM };

static enum look_obj look_obj(const char *file)
{
	if (!file)
		return LOOK_OTHER;
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (!strncmp(base, "ld-linux", 8))
		return LOOK_LOADER;
	if (!strncmp(base, "libcoprof-preload", 17))
		return LOOK_SHIM;
	if (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5) ||
	    !strncmp(base, "libpthread", 10) || !strncmp(base, "libdl", 5))
		return LOOK_LIBC;
	return locking_object(file) ? LOOK_ALLOC : LOOK_OTHER;
}

/* A condition wait gives its mutex back while it waits. */
static int cond_wait(const char *name)
{
	while (*name == '_')
		name++;
	return !strncmp(name, "pthread_cond_", 13) && strstr(name, "wait");
}

struct look {
	Dwfl *dwfl;
	int frames;
	int in_run;	   /* still in the C library's frames the system call was made from */
	const char *outer; /* the outermost of those so far */
	int verdict;	   /* -1 undecided, 0 safe, 1 not here */
};

/* Each frame of the stopped thread, innermost first. A frame of the loader's (which
 * holds its lock there) or of the shim's (a hook or a tick of its, which may hold the
 * shim's locks or libunwind's) anywhere: never. Stopped in a system call of the C
 * library's, the first frame out of it decides with the outermost of the C library's
 * (the function called there): an allocator only waiting on a condition (its
 * background threads), anything else unless that function holds a lock
 * (holds_lock). */
static int look_frame(Dwfl_Frame *f, void *arg)
{
	struct look *l = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(f, &pc, &activation) || ++l->frames > 256)
		return DWARF_CB_ABORT;
	Dwarf_Addr at = activation ? pc : pc - 1;
	Dwfl_Module *m = dwfl_addrmodule(l->dwfl, at);
	enum look_obj obj =
	    look_obj(m ? dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL);
	if (obj == LOOK_LOADER || obj == LOOK_SHIM) {
		l->verdict = 1;
		return DWARF_CB_ABORT;
	}
	if (!l->in_run)
		return DWARF_CB_OK;
	if (obj == LOOK_LIBC) {
		l->outer = dwfl_module_addrname(m, at);
		return DWARF_CB_OK;
	}
	l->in_run = 0;
	if (obj == LOOK_ALLOC)
		l->verdict = !l->outer || !cond_wait(l->outer);
	else
		l->verdict = !l->outer || holds_lock(l->outer);
	return l->verdict ? DWARF_CB_ABORT : DWARF_CB_OK;
}

static int shim_module(Dwfl_Module *m, void **userdata, const char *name, Dwarf_Addr start,
		       void *arg)
{
	(void)m, (void)userdata, (void)start;
	if (look_obj(name) != LOOK_SHIM)
		return DWARF_CB_OK;
	*(int *)arg = 1;
	return DWARF_CB_ABORT;
}

/* Has the process the shim loaded (then a running thread may be in it)? */
static int shim_in(Dwfl *dwfl)
{
	int in = 0;
	if (dwfl)
		dwfl_getmodules(dwfl, shim_module, &in, 0);
	return in;
}

/* Stopped thread `tid`: may it run the loader and the shim's entry where it is? Its
 * stack is unwound (libdwfl, from the objects' CFI; look_frame). `in_call`: it is in a
 * system call of the C library's. A thread all of the C library's (its helper
 * threads) is safe when the outermost function is named and holds no lock; one that
 * cannot be unwound out of the C library is not; past that, a stack that cannot be
 * unwound further is judged on what was seen. 0: safe; 1: not here. */
static int stack_safe(Dwfl *dwfl, pid_t tid, int in_call)
{
	if (!dwfl)
		return in_call ? 1 : 0;
	struct look l = {.dwfl = dwfl, .in_run = in_call, .verdict = in_call ? -1 : 0};
	int rc = dwfl_getthread_frames(dwfl, tid, look_frame, &l);
	if (l.verdict < 0)
		l.verdict = rc != 0 || !l.outer || holds_lock(l.outer);
	return l.verdict != 0;
}

/* Stopped thread `tid` at `r`: is it somewhere it may run the loader and the shim's
 * entry? In an idle system call (or a futex) where its stack is safe (stack_safe), or
 * running out of the C library; once the shim is loaded (`shim`), running nowhere
 * under the shim's code either (coprof_attach_thread would take the locks the shim's
 * code may hold there). And how it goes on afterwards: into *back, its rip and rax (a
 * system call the stop interrupted is restarted as the kernel would, at the syscall
 * instruction again). 0: safe; 1: not here; -1: never (not a 64-bit syscall to
 * restart). */
static int judge(int memfd, const struct maps *m, Dwfl *dwfl, int shim, pid_t tid,
		 const struct user_regs_struct *r, struct vw_tramp_block *back, int *restarted)
{
	long orig = (long)r->orig_rax, ret = (long)r->rax;
	back->rip = r->rip;
	back->rax = r->rax;
	*restarted = 0;
	if (orig >= 0) {
		if (!idle_syscall(orig) && orig != SYS_futex)
			return 1;
		if (stack_safe(dwfl, tid, in_libc(m, r->rip)) != 0)
			return 1;
		if (ret == -ERESTARTSYS || ret == -ERESTARTNOINTR || ret == -ERESTARTNOHAND ||
		    ret == -ERESTART_RESTARTBLOCK) {
			unsigned char insn[2];
			if (read_at(memfd, insn, 2, (off_t)(r->rip - 2)) != 0 || insn[0] != 0x0f ||
			    insn[1] != 0x05)
				return -1;
			back->rip = r->rip - 2;
			back->rax =
			    ret == -ERESTART_RESTARTBLOCK ? SYS_restart_syscall : (uint64_t)orig;
			*restarted = 1;
		}
		return 0;
	}
	return in_libc(m, r->rip) || (shim && stack_safe(dwfl, tid, 0)) ? 1 : 0;
}

static void fill_block(struct vw_tramp_block *b, const struct user_regs_struct *r)
{
	b->rbx = r->rbx, b->rcx = r->rcx, b->rdx = r->rdx, b->rsi = r->rsi, b->rdi = r->rdi;
	b->rbp = r->rbp, b->r8 = r->r8, b->r9 = r->r9, b->r10 = r->r10, b->r11 = r->r11;
	b->r12 = r->r12, b->r13 = r->r13, b->r14 = r->r14, b->r15 = r->r15;
	b->rsp = r->rsp, b->rflags = r->eflags;
}

struct vw_inject {
	pid_t pid;
	int memfd;
	struct maps maps;
	uint64_t dlopen_at, dlsym_at;
	Dwfl *dwfl; /* the objects, for unwinding a stopped thread (stack_safe); or NULL */
	int shim_in; /* the shim among them */
	uint64_t at;	 /* the trampoline's address in the target; 0: no room chosen yet */
	size_t room;	 /* bytes of padding it may use there (zero in the target) */
	int dirty;	 /* bytes written there, to put back to zero */
	char *image;	 /* code, block, strings, as written */
	size_t code_len; /* the block starts here */
	size_t len;
};

/* One try on thread `tid`: seize, stop, judge, and either put the trampoline in its
 * way and let go, or let go untouched. 0 done, 1 not at a safe point (try again), or
 * -errno. The thread is never left stopped. */
static int try_thread(struct vw_inject *j, pid_t tid, struct vw_inject_stats *st)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		return -errno;
	test_die(1);
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
		int e = -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return e;
	}
	int rc = wait_stop(tid);
	if (rc != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return rc;
	}
	/* From the stop coprof saw: a running thread runs on until its next entry into
	 * the kernel (a timer tick at worst) before it stops. */
	double t0 = now_ms();
	test_die(2);
	struct user_regs_struct r;
	struct vw_tramp_block *b = (struct vw_tramp_block *)(j->image + j->code_len);
	int restarted;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0) {
		rc = -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return rc;
	}
	rc = judge(j->memfd, &j->maps, j->dwfl, j->shim_in, tid, &r, b, &restarted);
	if (rc != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return rc < 0 ? -ENOEXEC : 1;
	}
	fill_block(b, &r);
	/* Memory first (padding nobody uses), then the registers in one call: from here
	 * on the thread is right to resume at any instant, whoever lets it go. */
	j->dirty = 1;
	if (pwrite(j->memfd, j->image, j->len, (off_t)j->at) != (ssize_t)j->len) {
		rc = -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return rc ? rc : -EIO;
	}
	test_die(3);
	struct user_regs_struct go = r;
	go.rip = j->at;
	go.orig_rax = (unsigned long long)-1; /* no restart by the kernel: the trampoline's */
	if (ptrace(PTRACE_SETREGS, tid, 0, &go) != 0) {
		rc = -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return rc;
	}
	test_die(4);
	ptrace(PTRACE_DETACH, tid, 0, 0);
	st->stopped_ms = now_ms() - t0;
	st->tid = tid;
	st->restarted = restarted;
	st->tramp_at = j->at;
	return 0;
}

/* Lays out code, block and strings, with the target's addresses of the strings. */
static int build_image(struct vw_inject *j, const char *shim, const char *entry, const char *opts)
{
	free(j->image);
	j->code_len = (size_t)(vw_tramp_end - vw_tramp_start);
	size_t lp = strlen(shim) + 1, le = strlen(entry) + 1, lo = strlen(opts) + 1;
	j->len = j->code_len + sizeof(struct vw_tramp_block) + lp + le + lo;
	j->image = calloc(1, j->len);
	if (!j->image)
		return -ENOMEM;
	memcpy(j->image, vw_tramp_start, j->code_len);
	char *s = j->image + j->code_len + sizeof(struct vw_tramp_block);
	memcpy(s, shim, lp);
	memcpy(s + lp, entry, le);
	memcpy(s + lp + le, opts, lo);
	return 0;
}

static void place_image(struct vw_inject *j)
{
	struct vw_tramp_block *b = (struct vw_tramp_block *)(j->image + j->code_len);
	uint64_t s = j->at + j->code_len + sizeof(*b);
	b->dlopen = j->dlopen_at;
	b->dlsym = j->dlsym_at;
	b->path = s;
	b->entry = s + strlen((char *)j->image + (s - j->at)) + 1;
	b->opts = b->entry + strlen((char *)j->image + (b->entry - j->at)) + 1;
}

/* dlopen and dlsym of the target: libc.so.6's (glibc 2.34 and later), else libdl's. */
static int find_loader(pid_t pid, const struct maps *m, uint64_t *dlopen_at, uint64_t *dlsym_at)
{
	static const char *const files[] = {"libc.so.6", "libdl.so.2"};
	for (size_t i = 0; i < 2; i++) {
		const struct map *f = find_file(m, files[i]);
		struct elf e;
		if (!f || elf_open(pid, m, f, &e) != 0)
			continue;
		int rc = elf_symbol(&e, "dlopen", dlopen_at);
		if (rc == 0)
			rc = elf_symbol(&e, "dlsym", dlsym_at);
		elf_close(&e);
		if (rc == 0)
			return 0;
	}
	return -ENOENT;
}

int vw_inject_open(pid_t pid, struct vw_inject **out, char *err, size_t errlen)
{
	struct vw_inject *j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	j->pid = pid;
	j->memfd = -1;
	if (read_maps(pid, &j->maps) != 0) {
		snprintf(err, errlen, "cannot read its memory map: %s", strerror(errno));
		vw_inject_close(j, 0);
		return -1;
	}
	if (find_loader(pid, &j->maps, &j->dlopen_at, &j->dlsym_at) != 0) {
		snprintf(err, errlen,
			 "no dlopen in its C library (glibc 2.34 or later, or "
			 "libdl, is needed)");
		vw_inject_close(j, 0);
		return -1;
	}
	if ((j->memfd = open_mem(pid, O_RDWR)) < 0) {
		int e = -j->memfd;
		snprintf(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(e));
		vw_inject_close(j, 0);
		return e == EACCES || e == EPERM ? -EPERM : -1;
	}
	*out = j;
	return 0;
}

int vw_inject_run(struct vw_inject *j, pid_t tid, const char *shim, const char *entry,
		  const char *opts, double wait_s, struct vw_inject_stats *st, char *err,
		  size_t errlen)
{
	memset(st, 0, sizeof(*st));
	/* The objects as they are now (the shim itself may have come since), read before
	 * any thread is stopped. */
	if (j->dwfl)
		dwfl_end(j->dwfl);
	j->dwfl = look_open(j->pid);
	j->shim_in = shim_in(j->dwfl);
	if (build_image(j, shim, entry, opts) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!j->at && find_room(j->pid, j->memfd, &j->maps, j->len, &j->at) == 0)
		j->room = j->len;
	if (!j->at || j->len > j->room) {
		snprintf(err, errlen,
			 "no room for the loader's trampoline (%zu bytes of padding after "
			 "an executable segment)",
			 j->len);
		return -1;
	}
	place_image(j);
	/* Thread after thread, best first (or the one asked), until one is at a safe
	 * point. */
	double end = now_ms() + wait_s * 1e3;
	int last = 0;
	do {
		pid_t tids[256];
		int n = tid ? 1 : list_threads(j->pid, tids, 256);
		if (tid)
			tids[0] = tid;
		if (n <= 0) {
			snprintf(err, errlen, "no thread left");
			return -1;
		}
		for (int i = 0; i < n; i++) {
			st->tries++;
			last = try_thread(j, tids[i], st);
			if (last == 0)
				return 0;
			if (last == -EPERM) {
				snprintf(err, errlen, "PTRACE_SEIZE: %s", strerror(EPERM));
				return -EPERM;
			}
			if (last == -EAGAIN) {
				snprintf(err, errlen,
					 "it is being stopped (job control); continue "
					 "it first");
				return -1;
			}
			if (last == -ESRCH && tid) {
				snprintf(err, errlen, "the thread exited");
				return -1;
			}
		}
		struct timespec pause = {0, 2 * 1000 * 1000};
		nanosleep(&pause, NULL);
	} while (now_ms() < end);
	snprintf(err, errlen,
		 "no thread stopped at a safe point within %g s (each was in the C library or "
		 "the loader, which may hold their locks)%s%s",
		 wait_s, last < 0 ? ": " : "", last < 0 ? strerror(-last) : "");
	return -1;
}

/* 1 when thread `tid` is out of the trampoline (its pc elsewhere, or gone), 0 when it
 * may be in it. A thread blocked in a system call is read from /proc; a running one is
 * stopped a moment (PTRACE_INTERRUPT) to read its rip. */
static int left(struct vw_inject *j, pid_t tid)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)j->pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 1;
	char *got = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!got)
		return 1;
	uint64_t pc = 0;
	if (strncmp(buf, "running", 7) != 0) {
		char *last = strrchr(buf, ' ');
		pc = last ? strtoull(last + 1, NULL, 16) : 0;
	} else {
		struct user_regs_struct r;
		if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
			return errno == ESRCH;
		int ok = ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 && wait_stop(tid) == 0 &&
			 ptrace(PTRACE_GETREGS, tid, 0, &r) == 0;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		if (!ok)
			return 0;
		pc = r.rip;
	}
	return pc && (pc < j->at || pc >= j->at + j->room);
}

int vw_inject_wait_left(struct vw_inject *j, pid_t tid, uint64_t calls_at, unsigned want,
			double timeout_s)
{
	double end = now_ms() + timeout_s * 1e3;
	struct timespec pause = {0, 1000 * 1000};
	for (;;) {
		unsigned calls = 0;
		if (vw_remote_read(j->pid, calls_at, &calls, sizeof(calls)) == 0 && calls >= want &&
		    left(j, tid))
			return 0;
		if (now_ms() > end)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

int vw_inject_close(struct vw_inject *j, int restore)
{
	int rc = 0;
	if (j->dirty && restore && j->memfd >= 0) {
		char *zero = calloc(1, j->room);
		rc = zero && pwrite(j->memfd, zero, j->room, (off_t)j->at) == (ssize_t)j->room
			 ? 0
			 : -EIO;
		free(zero);
	}
	if (j->memfd >= 0)
		close(j->memfd);
	if (j->dwfl)
		dwfl_end(j->dwfl);
	free(j->image);
	free(j->maps.v);
	free(j);
	return rc;
}
