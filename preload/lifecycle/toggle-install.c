/* toggle-install.c: installs the toggle signal's handler, and lets the program win it back.
 *
 * At start the handler is installed unless the program already has one for that
 * signal; signal-guard.c then keeps it: resets to SIG_DFL and masks only change what
 * the program is told. When the program later installs a handler (or SIG_IGN) of its
 * own for the toggle signal, that handler is installed and toggling by signal stops,
 * said once on stderr. Runs in the constructor, then in the program's threads. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"

static int toggle_signo; /* 0: no toggle signal */
static atomic_int owned; /* our handler is installed */

/* async-signal-safe (signal-guard.c may call it in a handler): strsignal and printf
 * are not, so the line is put together by hand. The control thread publishes the new
 * state, so `coprof toggle` stops sending to this process. */
static void toggle_lost(int signo)
{
	char line[128] = "coprof: the program installed its own handler for signal ";
	size_t n = strlen(line);
	atomic_store(&owned, 0);
	pl_control_republish();
	if (signo >= 10)
		line[n++] = (char)('0' + signo / 10 % 10);
	line[n++] = (char)('0' + signo % 10);
	const char *rest = "; toggling by signal is off\n";
	memcpy(line + n, rest, strlen(rest));
	ssize_t w = write(2, line, n + strlen(rest));
	(void)w;
}

void pl_toggle_install(int signo)
{
	struct sigaction old, sa;
	if (signo <= 0 || pl_sig_real_action(signo, NULL, &old) != 0)
		return;
	toggle_signo = signo;
	if ((old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
		pl_say("the program already handles signal %d (%s); toggling by signal is off "
		       "(set COPROF_SIGNAL to a free signal)",
		       signo, strsignal(signo));
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = pl_on_toggle_signal;
	/* SA_RESTART: the program's system calls go on as if nothing came; SA_SIGINFO: a
	 * request queued by coprof toggle says start or stop */
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (pl_sig_real_action(signo, &sa, NULL) != 0)
		return;
	atomic_store(&owned, 1);
	pl_sig_guard(signo, &old, 0, toggle_lost);
}

int pl_toggle_armed(void)
{
	return atomic_load(&owned) ? toggle_signo : 0;
}
