/* vfork.c: vfork, interposed so that the shim knows when it runs in a vfork child. Until
 * it execs or exits, the child shares the parent's memory and thread pointer, so its
 * instrumented calls would land on the parent's shadow stack. Before the system call
 * the thread's hook guard and vfork_child flag are set, and the parent puts them back
 * after it: the child's hooks (instrumented calls, exec, _exit, signal changes) then
 * touch nothing of the parent's, and the hot path pays nothing, as the hooks test the
 * guard anyway. The wrapper is assembly, as glibc's: the child returns through the
 * caller's frame, which the parent then reuses, so nothing may live on the stack
 * across the system call; the return address waits in a register the kernel keeps.
 * x86-64 only; elsewhere glibc's vfork runs unseen. posix_spawn and system() make
 * their children with clone(CLONE_VFORK) inside glibc, running no instrumented code. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>

#include "service.h"

#if defined(__x86_64__) && defined(SYS_vfork)

_Static_assert(SYS_vfork == 58, "the wrapper below names vfork's number");

PL_HIDDEN int pl_vfork_enter(void);
PL_HIDDEN void pl_vfork_parent(int was);
PL_HIDDEN long pl_vfork_failed(long rc);

/* Before the system call: marks the thread as a vfork child's (the child keeps the
 * mark: it is the parent's memory) and returns what the parent restores. */
int pl_vfork_enter(void)
{
	struct pl_tls *t = &pl_tls_data;
	int was = (t->guard ? 1 : 0) | (t->vfork_child ? 2 : 0);
	t->guard = 1;
	t->vfork_child = 1;
	return was;
}

/* In the parent, once the child has exec'ed or exited (or vfork failed). */
void pl_vfork_parent(int was)
{
	struct pl_tls *t = &pl_tls_data;
	t->guard = was & 1;
	t->vfork_child = (was & 2) != 0;
}

long pl_vfork_failed(long rc)
{
	errno = (int)-rc;
	return -1;
}

/* The stack is 16-byte aligned at each call (8 mod 16 at entry). In the child (rax 0)
 * it only returns. Shadow stacks (CET) are not handled: this object carries no
 * property note, so the loader turns them off for a process that preloads it. */
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".globl __vfork\n"
	".type __vfork, @function\n"
	"vfork:\n"
	"__vfork:\n"
	".cfi_startproc\n"
	"	sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"	call pl_vfork_enter\n"
	"	add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	mov %eax, %esi\n"
	"	pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	".cfi_register %rip, %rdi\n"
	"	mov $58, %eax\n"
	"	syscall\n"
	"	push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_offset %rip, -8\n"
	"	test %rax, %rax\n"
	"	jz 2f\n"
	"	sub $24, %rsp\n"
	".cfi_adjust_cfa_offset 24\n"
	"	mov %rax, 8(%rsp)\n"
	"	mov %esi, %edi\n"
	"	call pl_vfork_parent\n"
	"	mov 8(%rsp), %rax\n"
	"	add $24, %rsp\n"
	".cfi_adjust_cfa_offset -24\n"
	"	cmp $-4095, %rax\n"
	"	jae 1f\n"
	"	ret\n"
	"1:	mov %rax, %rdi\n"
	"	jmp pl_vfork_failed\n"
	"2:	ret\n"
	".cfi_endproc\n"
	".size vfork, .-vfork\n"
	".size __vfork, .-__vfork\n");

#endif
