/* signals.c: installs the toggle signal's handler, and lets the program win it back.
 *
 * At start the handler is installed unless the program already has one for that
 * signal. sigaction() and signal() are interposed: when the program later installs a
 * handler (or SIG_IGN) for the toggle signal, that handler is installed and toggling
 * by signal stops, said once on stderr. Runs in the program's threads. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

static int toggle_signo;      /* 0: no toggle signal */
static atomic_int owned;      /* our handler is installed */
static struct sigaction prog; /* what the program believes is installed */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int is_default(const struct sigaction *act)
{
	return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

void pl_signals_install(int signo)
{
	struct sigaction old, sa;
	if (signo <= 0 || !pl_real.sigaction)
		return;
	toggle_signo = signo;
	if (pl_real.sigaction(signo, NULL, &old) != 0)
		return;
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
	if (pl_real.sigaction(signo, &sa, NULL) != 0)
		return;
	prog = old;
	atomic_store(&owned, 1);
}

int pl_signals_armed(void)
{
	return atomic_load(&owned) ? toggle_signo : 0;
}

/* The program changes the toggle signal while we own it. Setting SIG_DFL only updates
 * what the program sees; any other disposition is really installed, and ours is gone. */
static int take_over(const struct sigaction *act, struct sigaction *oact)
{
	int rc = 0;
	int said = 0;
	pthread_mutex_lock(&lock);
	if (!atomic_load(&owned)) {
		pthread_mutex_unlock(&lock);
		return pl_real.sigaction(toggle_signo, act, oact);
	}
	if (oact)
		*oact = prog;
	if (act && is_default(act)) {
		prog = *act;
	} else if (act) {
		rc = pl_real.sigaction(toggle_signo, act, NULL);
		if (rc == 0) {
			atomic_store(&owned, 0);
			said = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	if (said)
		pl_control_republish();
	if (said)
		pl_say("the program installed its own handler for signal %d (%s); toggling by "
		       "signal is off",
		       toggle_signo, strsignal(toggle_signo));
	return rc;
}

PL_EXPORT int sigaction(int signo, const struct sigaction *act, struct sigaction *oact)
{
	if (!pl_real.sigaction)
		pl_resolve_reals();
	if (!pl_real.sigaction) {
		errno = ENOSYS;
		return -1;
	}
	if (signo != toggle_signo || signo == 0 || !atomic_load(&owned))
		return pl_real.sigaction(signo, act, oact);
	return take_over(act, oact);
}

PL_EXPORT void (*signal(int signo, void (*handler)(int)))(int)
{
	if (!pl_real.signal)
		pl_resolve_reals();
	if (signo != toggle_signo || signo == 0 || !atomic_load(&owned))
		return pl_real.signal ? pl_real.signal(signo, handler) : SIG_ERR;
	/* signal() has BSD semantics in glibc: restart, and block the signal in the handler */
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, signo);
	if (take_over(&act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
