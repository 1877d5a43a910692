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
	uint64_t dlopen, dlsym; /* the target's libc's */
	uint64_t path, entry, opts; /* the three strings after the block */
};

/* What inject measured, for the user and for bench/attach. */
struct vw_inject_stats {
	pid_t tid;		/* the thread that ran the trampoline */
	double stopped_ms;	/* from PTRACE_INTERRUPT to PTRACE_DETACH, the last try */
	int tries;		/* stops made until the thread was at a safe point */
	int restarted;		/* the thread was in a system call, restarted after */
	uint64_t tramp_at;	/* where the trampoline went */
};

/* Loads `shim` into process `pid` and calls its function `entry` with the string
 * `opts`, on one of its threads, through the trampoline; returns as soon as the thread
 * runs it (it has not run yet). The process is checked already (cmd-attach.c). 0, -EPERM
 * (ptrace refused), or -1
 * with one line in `err` (no prefix); the process is then left as it was. */
int vw_inject(pid_t pid, const char *shim, const char *entry, const char *opts,
	      struct vw_inject_stats *st, char *err, size_t errlen);

/* The address of the dynamic symbol `name` in the file mapped in `pid` whose path ends
 * with `suffix` (the first such mapping): 0 and *addr set, or -errno. For reading the
 * shim's exported data (its output path). */
int vw_remote_symbol(pid_t pid, const char *suffix, const char *name, uint64_t *addr);

/* Reads `len` bytes at `addr` of process `pid` (/proc/PID/mem). 0 or -errno. */
int vw_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
#endif

#endif
