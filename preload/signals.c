/* signals.c: installs the toggle signal's handler, and lets the program win it back.
 *
 * At start the handler is installed unless the program already has one for that
 * signal; signal-guard.c then keeps it: resets to SIG_DFL and masks only change what
 * the program is told. When the program later installs a handler (or SIG_IGN) of its
 * own for the toggle signal, that handler is installed and toggling by signal stops,
 * said once on stderr. Runs in the constructor, then in the program's threads. */
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* async-signal-safe (signal-guard.c may call it in a handler): strsignal and printf
 * are not, so the line is put together by hand. */
static void toggle_lost(int signo)
{
	char line[128] = "coprof: the program installed its own handler for signal ";
	size_t n = strlen(line);
	if (signo >= 10)
		line[n++] = (char)('0' + signo / 10 % 10);
	line[n++] = (char)('0' + signo % 10);
	const char *rest = "; toggling by signal is off\n";
	memcpy(line + n, rest, strlen(rest));
	ssize_t w = write(2, line, n + strlen(rest));
	(void)w;
}

void pl_signals_install(int signo)
{
	struct sigaction old, sa;
	if (signo <= 0 || pl_sig_real_action(signo, NULL, &old) != 0)
		return;
	if ((old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
		pl_say("the program already handles signal %d (%s); toggling by signal is off "
		       "(set COPROF_SIGNAL to a free signal)",
		       signo, strsignal(signo));
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pl_on_toggle_signal;
	sa.sa_flags = SA_RESTART; /* the program's system calls go on as if nothing came */
	sigemptyset(&sa.sa_mask);
	if (pl_sig_real_action(signo, &sa, NULL) != 0)
		return;
	pl_sig_guard(signo, &old, 0, toggle_lost);
}
