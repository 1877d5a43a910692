/* inject-x86_64.S: the trampoline `coprof attach` copies into a target process
 * (inject.c): code that runs once on one of the target's threads, loads the shim with
 * the target's own dlopen, calls the shim's attach entry, and puts the thread back
 * exactly as it was. It is never run in coprof itself: it is data between two labels.
 *
 * inject.c writes the block (struct vw_tramp_block, inject.h) right after the code, in
 * the padding of an executable page nobody runs, and then, in one PTRACE_SETREGS,
 * points the thread's rip here; every other register is as the thread had it, and the
 * block holds the values to put back (rip and rax already adjusted by inject.c when a
 * system call is to be restarted). So the thread is right to resume at every instant:
 * if coprof dies at any step the kernel resumes it here, and this code finishes alone.
 *
 * What it touches of the thread: nothing below the red zone of its stack but the 16
 * bytes that restore rflags; a stack of its own (mmap, freed before the return); the
 * signal mask, all blocked while the loader runs, then the thread's again; the x87,
 * SSE and AVX state, saved with xsave (fxsave without OSXSAVE) and restored. */
#include "inject.h"

	.section .rodata
	.balign 16
	.globl vw_tramp_start
	.globl vw_tramp_end
	.hidden vw_tramp_start
	.hidden vw_tramp_end
vw_tramp_start:
	/* A stack of our own: the thread's may be a small coroutine stack. */
	mov	$9, %eax			/* mmap */
	xor	%edi, %edi
	mov	$VW_TRAMP_STACK, %esi
	mov	$3, %edx			/* PROT_READ | PROT_WRITE */
	mov	$0x22, %r10d			/* MAP_PRIVATE | MAP_ANONYMOUS */
	mov	$-1, %r8
	xor	%r9d, %r9d
	syscall
	cmp	$-4095, %rax
	jae	.Lno_stack
	mov	%rax, %r12			/* our stack's base, for munmap */
	lea	VW_TRAMP_STACK(%rax), %rsp
	/* Every signal blocked while the loader runs (its locks are not for handlers);
	 * the thread's own mask kept at the top of our stack. */
	sub	$16, %rsp
	mov	%rsp, %r13
	mov	$14, %eax			/* rt_sigprocmask */
	mov	$2, %edi			/* SIG_SETMASK */
	lea	.Lall(%rip), %rsi
	mov	%r13, %rdx
	mov	$8, %r10d
	syscall
	/* The FP/SSE/AVX state: xsave, when the kernel enabled it (OSXSAVE), into an area
	 * the size CPUID gives for the enabled features, 64-byte aligned; the fresh mmap
	 * is zero, as xsave's header must be. Else fxsave's 512 bytes. */
	mov	$1, %eax
	xor	%ecx, %ecx
	cpuid
	bt	$27, %ecx
	jnc	.Lfx_save
	mov	$0xd, %eax
	xor	%ecx, %ecx
	cpuid
	sub	%rbx, %rsp
	and	$-64, %rsp
	mov	%rsp, %r14
	mov	$-1, %eax
	mov	$-1, %edx
	xsave64	(%r14)
	mov	$1, %r15d
	jmp	.Lsaved
.Lfx_save:
	sub	$512, %rsp
	and	$-64, %rsp
	mov	%rsp, %r14
	fxsave64 (%r14)
	xor	%r15d, %r15d
.Lsaved:
	and	$-16, %rsp
	cld
	/* handle = dlopen(path, RTLD_NOW); entry = dlsym(handle, name); entry(options) */
	mov	.Lblock+VW_B_PATH(%rip), %rdi
	mov	$2, %esi			/* RTLD_NOW (and RTLD_LOCAL) */
	call	*.Lblock+VW_B_DLOPEN(%rip)
	test	%rax, %rax
	jz	.Lfp_restore
	mov	%rax, %rdi
	mov	.Lblock+VW_B_ENTRY(%rip), %rsi
	call	*.Lblock+VW_B_DLSYM(%rip)
	test	%rax, %rax
	jz	.Lfp_restore
	mov	.Lblock+VW_B_OPTS(%rip), %rdi
	call	*%rax
.Lfp_restore:
	test	%r15d, %r15d
	jz	.Lfx_restore
	mov	$-1, %eax
	mov	$-1, %edx
	xrstor64 (%r14)
	jmp	.Lmask
.Lfx_restore:
	fxrstor64 (%r14)
.Lmask:
	mov	$14, %eax			/* rt_sigprocmask: the thread's mask again */
	mov	$2, %edi
	mov	%r13, %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall
	/* Back below the thread's red zone before our stack goes: a signal may come now. */
	mov	.Lblock+VW_B_RSP(%rip), %rsp
	sub	$256, %rsp
	and	$-16, %rsp
	mov	$11, %eax			/* munmap */
	mov	%r12, %rdi
	mov	$VW_TRAMP_STACK, %esi
	syscall
	jmp	.Lrestore
.Lno_stack:
	mov	.Lblock+VW_B_RSP(%rip), %rsp
	sub	$256, %rsp
	and	$-16, %rsp
.Lrestore:
	/* The thread's registers, then its rip: flags first (popfq needs a stack; the
	 * movs after it change no flag). */
	pushq	.Lblock+VW_B_FLAGS(%rip)
	popfq
	mov	.Lblock+VW_B_RAX(%rip), %rax
	mov	.Lblock+VW_B_RBX(%rip), %rbx
	mov	.Lblock+VW_B_RCX(%rip), %rcx
	mov	.Lblock+VW_B_RDX(%rip), %rdx
	mov	.Lblock+VW_B_RSI(%rip), %rsi
	mov	.Lblock+VW_B_RDI(%rip), %rdi
	mov	.Lblock+VW_B_RBP(%rip), %rbp
	mov	.Lblock+VW_B_R8(%rip), %r8
	mov	.Lblock+VW_B_R9(%rip), %r9
	mov	.Lblock+VW_B_R10(%rip), %r10
	mov	.Lblock+VW_B_R11(%rip), %r11
	mov	.Lblock+VW_B_R12(%rip), %r12
	mov	.Lblock+VW_B_R13(%rip), %r13
	mov	.Lblock+VW_B_R14(%rip), %r14
	mov	.Lblock+VW_B_R15(%rip), %r15
	mov	.Lblock+VW_B_RSP(%rip), %rsp
	jmp	*.Lblock+VW_B_RIP(%rip)
	.balign 8
.Lall:
	.quad	-1
	.balign 16
vw_tramp_end:
.Lblock:

	.section .note.GNU-stack, "", @progbits
