/* cmd-view.c: `coprof view FILE...`: loads and merges the files, then runs the curses
 * key loop: maps keys to browser actions (browse.c) and redraws (view-draw.c). The
 * terminal is restored on every way out. Main thread only. */
#include <curses.h>
#include <getopt.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

#include "browse.h"
#include "cmds.h"
#include "model.h"
#include "view-draw.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof view [--once] FILE...\n"
		   "Browses one profile, or several merged as pstats.add does. Press ? inside\n"
		   "for the keys. --once draws the first screen and exits (for benchmarks).\n");
}

/* What a fatal signal's handler needs to give the terminal back: its modes before
 * curses took it, and the bytes that leave the alternate screen and show the cursor. */
static struct termios saved_tty;
static int have_saved_tty;
static char restore_seq[256];
static size_t restore_len;

/* async-signal-safe: puts the terminal back as curses found it (endwin is not safe
 * here), then dies of the same signal with its default action, so the exit status
 * (and a core dump for QUIT) stay what the signal means. */
static void on_fatal_signal(int sig)
{
	if (restore_len) {
		ssize_t w = write(STDOUT_FILENO, restore_seq, restore_len);
		(void)w;
	}
	if (have_saved_tty)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tty);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Appends terminfo capability `cap` to the restore sequence, if the terminal has it. */
static void add_restore(const char *cap)
{
	char *s = tigetstr(cap);
	if (!s || s == (char *)-1)
		return;
	size_t n = strlen(s);
	if (restore_len + n < sizeof(restore_seq)) {
		memcpy(restore_seq + restore_len, s, n);
		restore_len += n;
	}
}

/* Every signal whose default action ends the process, caught before curses starts (so
 * curses does not put its own handler on INT and TERM: ours does the same, for all). */
static void catch_fatal_signals(void)
{
	static const int sigs[] = {SIGHUP,  SIGINT,  SIGQUIT,	SIGILL,	 SIGTRAP, SIGABRT, SIGBUS,
				   SIGFPE,  SIGUSR1, SIGSEGV,	SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
				   SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS};
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal_signal;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
			sigaction(sigs[i], &sa, NULL);
	}
}

/* The filter prompt: reads a line on the bottom row, redrawing as it goes. Returns 1
 * with the text in buf on Enter, 0 on Esc. */
static int read_filter(struct vw_browser *b, struct vw_ui *ui, char *buf, size_t len)
{
	size_t n = strlen(buf);
	for (;;) {
		ui->prompt = buf;
		vw_draw(b, ui);
		int c = getch();
		if (c == '\n' || c == '\r' || c == KEY_ENTER) {
			ui->prompt = NULL;
			return 1;
		}
		if (c == 27) {
			ui->prompt = NULL;
			return 0;
		}
		if ((c == KEY_BACKSPACE || c == 127 || c == 8) && n > 0) {
			/* Drop one whole UTF-8 character. */
			do
				n--;
			while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80);
			buf[n] = 0;
		} else if (c >= 0x20 && c < 0x100 && c != 127 && n + 1 < len) {
			buf[n++] = (char)c;
			buf[n] = 0;
		}
	}
}

/* One key; returns 0 to go on, 1 to quit, -ENOMEM. */
static int on_key(struct vw_browser *b, struct vw_ui *ui, int c)
{
	static const struct {
		int key;
		enum vw_action a;
	} moves[] = {
	    {KEY_UP, VW_UP},
	    {'k', VW_UP},
	    {KEY_DOWN, VW_DOWN},
	    {'j', VW_DOWN},
	    {KEY_PPAGE, VW_PAGE_UP},
	    {KEY_NPAGE, VW_PAGE_DOWN},
	    {' ', VW_PAGE_DOWN},
	    {KEY_HOME, VW_HOME},
	    {'g', VW_HOME},
	    {KEY_END, VW_END},
	    {'G', VW_END},
	    {'\n', VW_ENTER},
	    {'\r', VW_ENTER},
	    {KEY_ENTER, VW_ENTER},
	    {KEY_RIGHT, VW_ENTER},
	    {'l', VW_ENTER},
	    {KEY_BACKSPACE, VW_BACK},
	    {127, VW_BACK},
	    {8, VW_BACK},
	    {27, VW_BACK},
	    {KEY_LEFT, VW_BACK},
	    {'h', VW_BACK},
	    {'r', VW_REVERSE},
	    {'F', VW_FUNCS},
	    {'1', VW_FUNCS},
	    {'T', VW_TASKS},
	    {'2', VW_TASKS},
	    {'H', VW_THREADS},
	    {'3', VW_THREADS},
	    {'W', VW_TREE},
	    {'4', VW_TREE},
	    {'S', VW_STALLS},
	    {'5', VW_STALLS},
	    {'+', VW_EXPAND},
	    {'-', VW_COLLAPSE},
	};
	static const struct {
		int key;
		enum vw_sort s;
	} sorts[] = {
	    {'n', VW_SORT_NAME}, {'f', VW_SORT_FILE}, {'c', VW_SORT_NCALL}, {'s', VW_SORT_TSUB},
	    {'%', VW_SORT_TSUB}, {'t', VW_SORT_TTOT}, {'a', VW_SORT_TAVG},
	};
	if (ui->help) {
		ui->help = 0;
		return c == 'q' ? 1 : 0;
	}
	if (c == 'q' || c == 'Q')
		return 1;
	if (c == '?') {
		ui->help = 1;
		return 0;
	}
	if (c == '/') {
		char text[sizeof(b->filter)];
		memcpy(text, b->filter, sizeof(text));
		return read_filter(b, ui, text, sizeof(text)) ? vw_browser_filter(b, text) : 0;
	}
	if (c == '\t') {
		enum vw_screen_kind k = b->stack[b->depth > 1 ? 1 : 0].kind;
		enum vw_action a = k == VW_SCR_TASKS	 ? VW_THREADS
				   : k == VW_SCR_THREADS ? VW_FUNCS
							 : VW_TASKS;
		return vw_browser_act(b, a, vw_draw_rows());
	}
	for (size_t i = 0; i < sizeof(sorts) / sizeof(sorts[0]); i++)
		if (sorts[i].key == c)
			return vw_browser_sort(b, sorts[i].s);
	for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++)
		if (moves[i].key == c)
			return vw_browser_act(b, moves[i].a, vw_draw_rows());
	return 0;
}

int vw_cmd_view(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"once", no_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int once = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'o')
			once = 1;
		else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (!once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		fprintf(stderr, "coprof view: needs a terminal; for scripts use coprof report\n");
		return 2;
	}
	struct vw_model m;
	char err[512];
	if (vw_model_load(&m, argv + optind, argc - optind, err, sizeof(err))) {
		fprintf(stderr, "coprof view: %s\n", err);
		return 2;
	}
	struct vw_browser b;
	if (vw_browser_init(&b, &m)) {
		fprintf(stderr, "coprof view: out of memory\n");
		vw_model_free(&m);
		return 2;
	}
	setlocale(LC_ALL, "");
	have_saved_tty = tcgetattr(STDIN_FILENO, &saved_tty) == 0;
	catch_fatal_signals();
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		const char *term = getenv("TERM");
		fprintf(stderr, "coprof view: cannot use the terminal (TERM=%s)\n",
			term ? term : "");
		vw_browser_free(&b);
		vw_model_free(&m);
		return 2;
	}
	add_restore("sgr0");
	add_restore("cnorm");
	add_restore("rmkx");
	add_restore("rmcup");
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	const char *nc = getenv("NO_COLOR");
	struct vw_ui ui = {.color = has_colors() && !(nc && *nc)};
	vw_draw_init(&ui);
	int rc = 0, errs = 0;
	vw_draw(&b, &ui);
	while (!once && rc == 0) {
		c = getch();
		if (c == ERR) {
			/* Blocking reads only fail when the terminal has gone. */
			if (++errs > 100)
				break;
			continue;
		}
		errs = 0;
		if (c == KEY_RESIZE) {
			vw_draw(&b, &ui);
			continue;
		}
		rc = on_key(&b, &ui, c);
		if (rc == 0)
			vw_draw(&b, &ui);
	}
	endwin();
	delscreen(scr);
	vw_browser_free(&b);
	vw_model_free(&m);
	if (rc < 0) {
		fprintf(stderr, "coprof view: out of memory\n");
		return 2;
	}
	return 0;
}
