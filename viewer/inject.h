/* inject.h: loading the shim into a running process with ptrace (inject.c), and the
 * block its trampoline (inject-x86_64.S) reads, right after the trampoline's code in
 * the target. Shared by the C and the assembly: offsets as numbers, then the struct
 * they describe, checked against each other in inject.c. */
#ifndef VW_INJECT_H
#define VW_INJECT_H

#define VW_TRAMP_STACK (512 * 1024) /* the trampoline's own stack, mmap'ed and freed */

#define VW_B_RAX 0
#define VW_B_RBX 8
#define VW_B_RCX 16
#define VW_B_RDX 24
#define VW_B_RSI 32
#define VW_B_RDI 40
#define VW_B_RBP 48
#define VW_B_R8 56
#define VW_B_R9 64
#define VW_B_R10 72
#define VW_B_R11 80
#define VW_B_R12 88
#define VW_B_R13 96
#define VW_B_R14 104
#define VW_B_R15 112
#define VW_B_RSP 120
#define VW_B_RIP 128
#define VW_B_FLAGS 136
#define VW_B_DLOPEN 144
#define VW_B_DLSYM 152
#define VW_B_PATH 160
#define VW_B_ENTRY 168
#define VW_B_OPTS 176
#define VW_B_SIZE 184 /* then the three strings */

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the trampoline puts back and calls; addresses are the target's. */
struct vw_tramp_block {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rsp, rip, rflags;
	uint64_t dlopen, dlsym;	    /* the target's libc's */
	uint64_t path, entry, opts; /* the three strings after the block */
};

/* What inject measured, for the user and for bench/attach. */
struct vw_inject_stats {
	pid_t tid;	   /* the thread that ran the trampoline */
	double stopped_ms; /* from the stop (as waitpid saw it) to PTRACE_DETACH */
	int tries;	   /* stops made until the thread was at a safe point */
	int restarted;	   /* the thread was in a system call, restarted after */
	uint64_t tramp_at; /* where the trampoline went */
};

/* One process being attached: its maps, its loader, the room for the trampoline. */
struct vw_inject;

/* Opens process `pid` for injection (checked already: cmd-attach.c). 0, -EPERM (its
 * memory may not be written), or -1 with one line in `err` (no prefix). */
int vw_inject_open(pid_t pid, struct vw_inject **out, char *err, size_t errlen);
/* Makes thread `tid` (0: the best thread, vw_inject picks) dlopen `shim` and call its
 * function `entry` with the string `opts`, through the trampoline; tries for `wait_s`
 * seconds to find the thread at a safe point. Returns as soon as the thread runs the
 * trampoline (it has not run it yet): 0, -EPERM (ptrace refused), or -1 with one line
 * in `err`; the process is then as it was. One thread at a time: the next run rewrites
 * the trampoline, so first wait until this thread has left it. */
int vw_inject_run(struct vw_inject *j, pid_t tid, const char *shim, const char *entry,
		  const char *opts, double wait_s, struct vw_inject_stats *st, char *err,
		  size_t errlen);
/* Waits until the shim's count of entry calls, an unsigned at `calls_at` in the
 * target, reaches `want` and thread `tid` has left the trampoline: 0, or -ETIMEDOUT. */
int vw_inject_wait_left(struct vw_inject *j, pid_t tid, uint64_t calls_at, unsigned want,
			double timeout_s);
/* Closes; with `restore` (every thread has left), writes the padding back to zeros,
 * so the target's memory is as it was. 0, or -EIO when it could not. */
int vw_inject_close(struct vw_inject *j, int restore);

/* The address of the dynamic symbol `name` in the file mapped in `pid` whose path ends
 * with `suffix` (the first such mapping): 0 and *addr set, or -errno. For reading the
 * shim's exported data (its output path). */
int vw_remote_symbol(pid_t pid, const char *suffix, const char *name, uint64_t *addr);
/* Whether some ELF file mapped in `pid` imports the dynamic symbol `name` (has it
 * undefined): 1 or 0. */
int vw_remote_imports(pid_t pid, const char *name);

/* Reads `len` bytes at `addr` of process `pid` (/proc/PID/mem). 0 or -errno. */
int vw_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* Writes them there (an aligned int is written whole). 0 or -errno. */
int vw_remote_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
#endif

#endif
