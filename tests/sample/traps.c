/* traps.c: a SIGTRAP that is not a tick, under sample mode (run.py case sigtrap).
 *
 * usage: traps HOW DISPOSITION. HOW: int3 (a breakpoint the kernel forces on the thread)
 * or raise. DISPOSITION, set after 0.1 s of CPU (ticks are running by then): dfl, ign,
 * handler, or blocked (dfl with SIGTRAP blocked, then unblocked after the trap). Prints
 * "handled N" after a handled trap, "unblocking" before the unblock and "survived" after
 * any trap that did not end the process. Unprofiled: dfl ends it on SIGTRAP, ign
 * survives a raise and not an int3 (the kernel makes a forced trap fatal), handler
 * survives with N = 1, blocked ends an int3 at once and a raise at the unblock. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "burn.h"

static volatile sig_atomic_t handled;

static void on_trap(int sig)
{
	(void)sig;
	handled++;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	burn(0.1);
	if (strcmp(argv[2], "ign") == 0)
		signal(SIGTRAP, SIG_IGN);
	else if (strcmp(argv[2], "handler") == 0)
		signal(SIGTRAP, on_trap);
	else
		signal(SIGTRAP, SIG_DFL);
	sigset_t trap;
	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	int blocked = strcmp(argv[2], "blocked") == 0;
	if (blocked)
		sigprocmask(SIG_BLOCK, &trap, NULL);
	burn(0.05);
	if (strcmp(argv[1], "raise") == 0)
		raise(SIGTRAP);
	else
		__asm__ volatile("int3");
	if (blocked) {
		printf("unblocking\n");
		fflush(stdout);
		sigprocmask(SIG_UNBLOCK, &trap, NULL);
	}
	if (handled)
		printf("handled %d\n", (int)handled);
	printf("survived\n");
	return 0;
}
