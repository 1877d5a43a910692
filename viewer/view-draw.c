/* view-draw.c: draws `coprof view` with curses from the browser's state (browse.h):
 * a two-line header, the screen's title and columns, its rows, and a key bar. It
 * reads the state and changes only the scroll position. Main thread only. */
#include <curses.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "view-draw.h"

enum { PAIR_HEAD = 1, PAIR_COLS, PAIR_CURSOR, PAIR_SELF };

/* Fixed columns of a function row: ncall, tsub, ttot, tavg, tsub% (each with a space). */
#define W_NCALL 9
#define W_TIME 8
#define W_PCT 5
#define W_NUMS (W_NCALL + 3 * W_TIME + W_PCT + 5)
#define W_REL 6

static int use_color;

void vw_draw_init(const struct vw_ui *ui)
{
	use_color = ui->color;
	if (!use_color)
		return;
	start_color();
	use_default_colors();
	init_pair(PAIR_HEAD, COLOR_BLACK, COLOR_CYAN);
	init_pair(PAIR_COLS, COLOR_BLACK, COLOR_GREEN);
	init_pair(PAIR_CURSOR, COLOR_BLACK, COLOR_CYAN);
	init_pair(PAIR_SELF, COLOR_YELLOW, -1);
}

static attr_t attr_head(void)
{
	return use_color ? COLOR_PAIR(PAIR_HEAD) : A_REVERSE;
}

static attr_t attr_cols(void)
{
	return use_color ? COLOR_PAIR(PAIR_COLS) : A_BOLD | A_UNDERLINE;
}

static attr_t attr_cursor(void)
{
	return use_color ? COLOR_PAIR(PAIR_CURSOR) : A_REVERSE;
}

uint32_t vw_draw_rows(void)
{
	return LINES > 5 ? (uint32_t)(LINES - 5) : 1;
}

/* A line being built: cells append to buf, each fitted and padded to its width in
 * characters (not bytes, for UTF-8 names). */
struct line {
	char buf[4096];
	size_t at;
};

/* One blank column: before every row (where the cursor bar shows) and after each cell. */
static void lead(struct line *l)
{
	l->buf[l->at++] = ' ';
	l->buf[l->at] = 0;
}

static void cell(struct line *l, const char *text, int width, int right, int cut_left)
{
	char fit[1024];
	if (width <= 0)
		return;
	int n = vw_fit(fit, sizeof(fit), text, width, cut_left);
	int pad = width - n;
	size_t len = strlen(fit);
	if (l->at + len + (size_t)pad + 2 >= sizeof(l->buf))
		return;
	if (right) {
		memset(l->buf + l->at, ' ', (size_t)pad);
		l->at += (size_t)pad;
	}
	memcpy(l->buf + l->at, fit, len);
	l->at += len;
	if (!right) {
		memset(l->buf + l->at, ' ', (size_t)pad);
		l->at += (size_t)pad;
	}
	lead(l);
}

/* Puts `text` on screen row y, cut to the screen width, filling the rest with the
 * attribute too (so bars and the cursor span the whole width). */
static void put_row(int y, const char *text, attr_t attr)
{
	char fit[4096], trimmed[4096];
	size_t n = strlen(text);
	while (n > 0 && text[n - 1] == ' ')
		n--;
	if (n >= sizeof(trimmed))
		n = sizeof(trimmed) - 1;
	/* Control characters from a file (a name may hold anything) would move the
	 * cursor: show them as '?'. */
	for (size_t i = 0; i < n; i++)
		trimmed[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
	trimmed[n] = 0;
	vw_fit(fit, sizeof(fit), trimmed, COLS, 0);
	attrset(attr);
	mvhline(y, 0, ' ', COLS);
	mvaddstr(y, 0, fit);
	attrset(A_NORMAL);
}

static void name_widths(int rel, int *namew, int *filew)
{
	int left = COLS - 1 - W_NUMS - (rel ? W_REL + 1 : 0);
	if (left < 8)
		left = 8;
	*namew = rel ? left / 2 : left * 2 / 3;
	*filew = left - *namew - 1;
}

static void func_cells(struct line *l, const char *rel, const struct cp_key *k,
		       const struct cp_stat *s, double total)
{
	char buf[1200];
	int namew, filew;
	name_widths(rel != NULL, &namew, &filew);
	lead(l);
	if (rel)
		cell(l, rel, W_REL, 0, 0);
	cell(l, k->name, namew, 0, 0);
	vw_fmt_where(buf, sizeof(buf), k);
	cell(l, buf, filew, 0, 1);
	vw_fmt_calls(buf, sizeof(buf), s);
	cell(l, buf, W_NCALL, 1, 0);
	vw_fmt_time(buf, sizeof(buf), s->tt, W_TIME);
	cell(l, buf, W_TIME, 1, 0);
	vw_fmt_time(buf, sizeof(buf), s->ct, W_TIME);
	cell(l, buf, W_TIME, 1, 0);
	vw_fmt_time(buf, sizeof(buf), vw_tavg(s), W_TIME);
	cell(l, buf, W_TIME, 1, 0);
	snprintf(buf, sizeof(buf), "%.1f", total > 0 ? 100.0 * s->tt / total : 0.0);
	cell(l, buf, W_PCT, 1, 0);
}

static void func_columns(struct line *l, int rel)
{
	struct cp_key k = {"file:line", 0, "name"};
	int namew, filew;
	name_widths(rel, &namew, &filew);
	lead(l);
	if (rel)
		cell(l, "rel", W_REL, 0, 0);
	cell(l, k.name, namew, 0, 0);
	cell(l, k.file, filew, 0, 0);
	cell(l, "ncall", W_NCALL, 1, 0);
	cell(l, "tsub", W_TIME, 1, 0);
	cell(l, "ttot", W_TIME, 1, 0);
	cell(l, "tavg", W_TIME, 1, 0);
	cell(l, "tsub%", W_PCT, 1, 0);
}

/* A tree row: its name indented by depth, with "-" when open and "+" when it has
 * callees to open; a bar of the root's ttot this edge carries (the icicle's width);
 * then the edge's numbers and that share in percent. */
#define W_BAR 10
static void tree_cells(struct line *l, const struct vw_tree *tr, int64_t i)
{
	char buf[1200], name[1100];
	/* No tavg here: the name, indented, needs the room more. */
	int left = COLS - 2 - (W_BAR + 1) - (W_NCALL + 1) - 2 * (W_TIME + 1) - (W_PCT + 1);
	if (left < 12)
		left = 12;
	int filew = left / 3, namew = left - filew - 1;
	lead(l);
	if (i < 0) {
		cell(l, "name", namew, 0, 0);
		cell(l, "share", W_BAR, 0, 0);
		cell(l, "file:line", filew, 0, 0);
		cell(l, "ncall", W_NCALL, 1, 0);
		cell(l, "tsub", W_TIME, 1, 0);
		cell(l, "ttot", W_TIME, 1, 0);
		cell(l, "ttot%", W_PCT, 1, 0);
		return;
	}
	const struct vw_tnode *r = &tr->rows[i];
	const struct vw_func *f = &tr->t->funcs[r->func];
	uint32_t indent = r->depth * 2 < (uint32_t)namew / 2 ? r->depth * 2 : (uint32_t)namew / 2;
	snprintf(name, sizeof(name), "%*s%s %s", (int)indent, "",
		 r->open ? "-" : f->ncallees ? "+" : " ", f->key.name ? f->key.name : "");
	cell(l, name, namew, 0, 0);
	double share = tr->total > 0 ? r->s.ct / tr->total : 0;
	int fill = (int)(share * W_BAR + 0.5);
	for (int k = 0; k < W_BAR; k++)
		buf[k] = k < fill ? '#' : '.';
	buf[W_BAR] = 0;
	cell(l, buf, W_BAR, 0, 0);
	vw_fmt_where(buf, sizeof(buf), &f->key);
	cell(l, buf, filew, 0, 1);
	vw_fmt_calls(buf, sizeof(buf), &r->s);
	cell(l, buf, W_NCALL, 1, 0);
	vw_fmt_time(buf, sizeof(buf), r->s.tt, W_TIME);
	cell(l, buf, W_TIME, 1, 0);
	vw_fmt_time(buf, sizeof(buf), r->s.ct, W_TIME);
	cell(l, buf, W_TIME, 1, 0);
	snprintf(buf, sizeof(buf), "%.1f", 100.0 * share);
	cell(l, buf, W_PCT, 1, 0);
}

static void task_cells(struct line *l, const struct cp_task *t)
{
	char buf[64];
	int namew = COLS - 1 - (6 + 9 + 8 + 9 + 8 + 10 + 10 + 8);
	lead(l);
	snprintf(buf, sizeof(buf), "%" PRIu64, t->id);
	cell(l, buf, 6, 1, 0);
	cell(l, t->name ? t->name : "", namew, 0, 0);
	cell(l, t->runtime ? t->runtime : "", 9, 0, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64, t->thread);
	cell(l, buf, 8, 1, 0);
	cell(l, t->state ? t->state : "", 9, 0, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64, t->resumes);
	cell(l, buf, 8, 1, 0);
	vw_fmt_time(buf, sizeof(buf), t->ttot, 10);
	cell(l, buf, 10, 1, 0);
	if (t->timed)
		vw_fmt_time(buf, sizeof(buf), t->ready, 10);
	else
		snprintf(buf, sizeof(buf), "-");
	cell(l, buf, 10, 1, 0);
}

static void task_columns(struct line *l)
{
	int namew = COLS - 1 - (6 + 9 + 8 + 9 + 8 + 10 + 10 + 8);
	lead(l);
	cell(l, "id", 6, 1, 0);
	cell(l, "name", namew, 0, 0);
	cell(l, "runtime", 9, 0, 0);
	cell(l, "thread", 8, 1, 0);
	cell(l, "state", 9, 0, 0);
	cell(l, "resumes", 8, 1, 0);
	cell(l, "ttot", 10, 1, 0);
	cell(l, "ready", 10, 1, 0);
}

static void thread_cells(struct line *l, const struct cp_thread *t, int head)
{
	char buf[64];
	int namew = COLS - 1 - (10 + 10 + 12 + 4);
	lead(l);
	if (head) {
		cell(l, "tid", 10, 1, 0);
		cell(l, "name", namew, 0, 0);
		cell(l, "switches", 10, 1, 0);
		cell(l, "ttot", 12, 1, 0);
		return;
	}
	snprintf(buf, sizeof(buf), "%" PRIu64, t->tid);
	cell(l, buf, 10, 1, 0);
	cell(l, t->name ? t->name : "", namew, 0, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64, t->switches);
	cell(l, buf, 10, 1, 0);
	vw_fmt_time(buf, sizeof(buf), t->ttot, 12);
	cell(l, buf, 12, 1, 0);
}

static void stall_cells(struct line *l, const struct cp_stall *st)
{
	char buf[64];
	int stackw = COLS - 1 - (12 + 24 + 8 + 7 + 5);
	lead(l);
	if (!st) {
		cell(l, "length", 12, 1, 0);
		cell(l, "task", 24, 0, 0);
		cell(l, "thread", 8, 1, 0);
		cell(l, "behind", 7, 1, 0);
		cell(l, "stack, innermost first", stackw, 0, 0);
		return;
	}
	snprintf(buf, sizeof(buf), "%.3f ms", st->seconds * 1e3);
	cell(l, buf, 12, 1, 0);
	char task[96];
	if (st->task_id)
		snprintf(task, sizeof(task), "%s %" PRIu64, st->task ? st->task : "", st->task_id);
	else /* a loop callback, run by the thread itself (rule 11) */
		snprintf(task, sizeof(task), "callback %s", st->task ? st->task : "");
	cell(l, task, 24, 0, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64, st->thread);
	cell(l, buf, 8, 1, 0);
	if (st->behind >= 0)
		snprintf(buf, sizeof(buf), "%" PRId64, st->behind);
	else
		snprintf(buf, sizeof(buf), "-");
	cell(l, buf, 7, 1, 0);
	char stack[1024];
	vw_fmt_stack(stack, sizeof(stack), st->frames, st->depth, " < ", 0);
	cell(l, stack, stackw, 0, 0);
}

static void draw_header(struct vw_browser *b)
{
	const struct vw_model *m = b->m;
	char cmd[1024], line[2048];
	vw_model_command(m, cmd, sizeof(cmd));
	char pid[32] = "-";
	if (m->pid >= 0)
		snprintf(pid, sizeof(pid), "%" PRId64, m->pid);
	if (m->ex)
		snprintf(line, sizeof(line),
			 " coprof  clock: %s  mode: %s  duration: %.3f s  pid: %s  command: %s",
			 m->clock, m->mode, m->duration, pid, cmd);
	else
		snprintf(line, sizeof(line),
			 " coprof  pstats file without coprof extras: no clock, mode, pid, tasks");
	put_row(0, line, attr_head() | A_BOLD);
	int at = snprintf(line, sizeof(line),
			  " %" PRIu64 " calls (%" PRIu64 " primitive) in %.6f s, %" PRIu32
			  " functions, %" PRIu32 " tasks, %" PRIu32 " threads;",
			  m->funcs.total_nc, m->funcs.total_cc, m->funcs.total_tt, m->funcs.nfuncs,
			  m->ntasks, m->nthreads);
	for (uint32_t i = 0; i < m->nprofiles && at > 0 && (size_t)at < sizeof(line) - 2; i++)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " %s", m->paths[i]);
	put_row(1, line, A_NORMAL);
}

static void draw_title(struct vw_browser *b, struct vw_screen *s)
{
	char line[2048], where[1200];
	const char *order = b->q.reverse ? "reversed" : "";
	switch (s->kind) {
	case VW_SCR_FUNCS: {
		char what[300] = "Functions";
		if (s->task >= 0) {
			const struct cp_task *t = b->m->tasks[s->task].t;
			snprintf(what, sizeof(what), "Task %" PRIu64 " %s: functions", t->id,
				 t->name ? t->name : "");
		}
		int n =
		    snprintf(line, sizeof(line), " %s: %" PRIu32 " of %" PRIu32 "   sort: %s %s",
			     what, s->nrows, s->table->nfuncs, vw_sort_name(b->q.sort), order);
		if (b->q.filter && n > 0)
			snprintf(line + n, sizeof(line) - (size_t)n, "  filter: \"%s\"",
				 b->q.filter);
		break;
	}
	case VW_SCR_EDGES: {
		const struct vw_func *f = &s->table->funcs[s->func];
		vw_fmt_where(where, sizeof(where), &f->key);
		snprintf(line, sizeof(line),
			 " %s (%s): %" PRIu32 " callers, %" PRIu32 " callees   sort: %s %s",
			 f->key.name, where, s->ncallers, s->ncallees, vw_sort_name(b->q.sort),
			 order);
		break;
	}
	case VW_SCR_TASKS:
		snprintf(line, sizeof(line), " Tasks: %" PRIu32 " (by ttot)%s", s->nrows,
			 s->nrows ? "" : "  - this profile has no task table");
		break;
	case VW_SCR_THREADS:
		snprintf(line, sizeof(line), " Threads: %" PRIu32 " (by ttot)%s", s->nrows,
			 s->nrows ? "" : "  - this profile has no thread table");
		break;
	case VW_SCR_STALLS:
		if (b->m->stall_threshold > 0)
			snprintf(line, sizeof(line),
				 " Stalls: %" PRIu32 " steps of %.3f ms or more, longest first",
				 s->nrows, b->m->stall_threshold * 1e3);
		else
			snprintf(line, sizeof(line),
				 " Stalls: not measured (no task's step was seen, or the file is "
				 "older than stalls)");
		break;
	case VW_SCR_TREE:
		snprintf(line, sizeof(line),
			 " Whole-program tree: %" PRIu32 " rows; per call edge, as snakeviz%s",
			 s->nrows,
			 b->m->clock && !strcmp(b->m->clock, "wall") ? "; wall: tasks overlap"
								      : "");
		break;
	}
	put_row(2, line, A_BOLD);
}

/* Builds row i of screen s (or the column header when i is -1) into l. Returns the
 * extra attribute the row wants (the function itself on an edges screen). */
static attr_t build_row(struct vw_browser *b, struct vw_screen *s, int64_t i, struct line *l)
{
	const struct vw_model *m = b->m;
	double total = s->table ? s->table->total_tt : 0;
	l->at = 0;
	l->buf[0] = 0;
	switch (s->kind) {
	case VW_SCR_FUNCS:
		if (i < 0)
			func_columns(l, 0);
		else {
			const struct vw_func *f = &s->table->funcs[s->rows[i]];
			func_cells(l, NULL, &f->key, &f->s, total);
		}
		return A_NORMAL;
	case VW_SCR_EDGES: {
		if (i < 0) {
			func_columns(l, 1);
			return A_NORMAL;
		}
		uint32_t u = (uint32_t)i;
		if (u == s->ncallers) {
			const struct vw_func *f = &s->table->funcs[s->func];
			func_cells(l, "self", &f->key, &f->s, total);
			return A_BOLD | (use_color ? COLOR_PAIR(PAIR_SELF) : 0);
		}
		const struct vw_edge *e = &s->edges[u < s->ncallers ? u : u - 1];
		func_cells(l, u < s->ncallers ? "caller" : "callee", &s->table->funcs[e->func].key,
			   &e->s, total);
		return A_NORMAL;
	}
	case VW_SCR_TASKS:
		if (i < 0)
			task_columns(l);
		else
			task_cells(l, m->tasks[s->rows[i]].t);
		return A_NORMAL;
	case VW_SCR_THREADS:
		thread_cells(l, i < 0 ? NULL : m->threads[s->rows[i]].t, i < 0);
		return A_NORMAL;
	case VW_SCR_TREE:
		tree_cells(l, s->tree, i);
		return A_NORMAL;
	case VW_SCR_STALLS:
		stall_cells(l, i < 0 ? NULL : m->stalls[s->rows[i]].s);
		return A_NORMAL;
	}
	return A_NORMAL;
}

static const char *const help_lines[] = {
    "coprof view: keys",
    "",
    "  Up/Down j/k  move          PgUp/PgDn Space  page      Home/End g/G  ends",
    "  Enter l Right  callers and callees of the function; on a caller or",
    "                 callee, go to it; on a task, its own functions",
    "  Backspace Esc h Left  back to the screen before",
    "  n f c s t a  sort by name, file:line, ncall, tsub, ttot, tavg",
    "  %            sort by tsub% (same as tsub)    r  reverse the order",
    "  /            filter: keep functions whose name or file contains the",
    "               text (Enter applies, empty clears, Esc cancels)",
    "  F 1          function table     T 2  task table     H 3  thread table",
    "  Tab          next of those three tables",
    "  W 4          whole-program tree, from the root snakeviz draws: Enter",
    "               opens or closes a row, + opens, - closes or goes up",
    "  S 5          stalls, longest first: Enter, the innermost function's",
    "  ?            this help          q    quit",
    "",
    "  ncall is nc/cc when some calls were recursive; tsub is own time, ttot",
    "  cumulative time, tavg ttot per call, tsub% the share of all own time.",
    "",
    "  Press any key to close this help.",
};

static void draw_help(void)
{
	int n = (int)(sizeof(help_lines) / sizeof(help_lines[0]));
	int y0 = 2;
	for (int i = 0; i < LINES - 3; i++) {
		move(y0 + i, 0);
		clrtoeol();
		if (i < n)
			mvaddnstr(y0 + i, 1, help_lines[i], COLS > 1 ? COLS - 1 : 0);
	}
	if (n > 0)
		put_row(y0, " coprof view: keys (press any key to close)", A_BOLD);
}

static void draw_bar(struct vw_browser *b, const struct vw_ui *ui)
{
	char line[512];
	int y = LINES - 1;
	if (ui->prompt) {
		snprintf(line, sizeof(line), "filter (name or file contains): %s", ui->prompt);
		put_row(y, line, A_NORMAL);
		curs_set(1);
		return;
	}
	curs_set(0);
	if (b->note) {
		put_row(y, b->note, A_BOLD);
		return;
	}
	if (vw_browser_top(b)->kind == VW_SCR_TREE) {
		put_row(y,
			" ?:help  Enter:open/close  +:open  -:close/up  Bksp:back  F:functions  "
			"q:quit",
			attr_head());
		return;
	}
	put_row(y,
		" ?:help  Enter:callers/callees  Bksp:back  /:filter  T:tasks  H:threads  q:quit",
		attr_head());
}

void vw_draw(struct vw_browser *b, const struct vw_ui *ui)
{
	erase();
	if (LINES < 8 || COLS < 40) {
		mvaddnstr(0, 0, "coprof view: the terminal is too small (40x8 at least)", COLS);
		refresh();
		return;
	}
	struct vw_screen *s = vw_browser_top(b);
	uint32_t rows = vw_draw_rows();
	vw_screen_scroll(s, rows);
	struct line *l = &(struct line){{0}, 0};
	draw_header(b);
	if (ui->help) {
		draw_help();
		draw_bar(b, ui);
		refresh();
		return;
	}
	draw_title(b, s);
	build_row(b, s, -1, l);
	put_row(3, l->buf, attr_cols());
	for (uint32_t r = 0; r < rows && s->top + r < s->nrows; r++) {
		uint32_t i = s->top + r;
		attr_t a = build_row(b, s, i, l);
		put_row(4 + (int)r, l->buf, i == s->cursor ? attr_cursor() : a);
	}
	if (!s->nrows)
		put_row(4,
			s->kind == VW_SCR_FUNCS && b->q.filter
			    ? "  (no function matches the filter)"
			    : "  (empty)",
			A_NORMAL);
	draw_bar(b, ui);
	if (ui->prompt)
		move(LINES - 1,
		     (int)strlen("filter (name or file contains): ") + (int)strlen(ui->prompt));
	refresh();
}
