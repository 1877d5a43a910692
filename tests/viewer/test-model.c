/* test-model.c: the viewer's model with hand-built profiles: merging as pstats.add,
 * callers and callees, sorting and filtering, number formatting, and the browser's
 * navigation (enter, back, sort and filter keep the cursor). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "browse.h"
#include "fmt.h"
#include "model.h"

/* main -> work -> leaf, main -> leaf; keys in "a.py". */
static struct cp_edge work_callers[] = {{0, {1, 1, 0.5, 2.0}}};
static struct cp_edge leaf_callers[] = {{1, {3, 3, 0.3, 0.3}}, {0, {1, 1, 0.1, 0.1}}};
static struct cp_func funcs1[] = {
    {{"a.py", 1, "main"}, {1, 1, 1.0, 3.4}, NULL, 0},
    {{"a.py", 10, "work"}, {1, 1, 1.7, 2.0}, work_callers, 1},
    {{"a.py", 20, "leaf"}, {4, 4, 0.4, 0.4}, leaf_callers, 2},
};
static const struct cp_stats stats1 = {funcs1, 3};

/* A second run: leaf again (same key, recursive now) and a new function. */
static struct cp_edge leaf2_callers[] = {{0, {1, 2, 0.2, 0.5}}}; /* cc, nc, tt, ct */
static struct cp_func funcs2[] = {
    {{"a.py", 10, "work"}, {1, 1, 0.5, 0.8}, NULL, 0},
    {{"a.py", 20, "leaf"}, {6, 7, 1.2, 1.5}, leaf2_callers, 1},
    {{"b.py", 5, "other"}, {2, 2, 0.1, 0.1}, NULL, 0},
};
static const struct cp_stats stats2 = {funcs2, 3};

static struct vw_table table;

static void build(int both)
{
	const struct cp_stats *st[] = {&stats1, &stats2};
	cr_assert_eq(vw_table_build(&table, st, both ? 2 : 1), 0);
}

static int64_t find(const char *name)
{
	for (uint32_t i = 0; i < table.nfuncs; i++)
		if (!strcmp(table.funcs[i].key.name, name))
			return i;
	return -1;
}

static void teardown(void)
{
	vw_table_free(&table);
}

TestSuite(table, .fini = teardown);

Test(table, one_dict_links_callers_and_callees)
{
	build(0);
	cr_assert_eq(table.nfuncs, 3);
	int64_t main_ = find("main"), work = find("work"), leaf = find("leaf");
	const struct vw_func *m = &table.funcs[main_];
	cr_assert_eq(m->ncallers, 0);
	cr_assert_eq(m->ncallees, 2);
	const struct vw_func *l = &table.funcs[leaf];
	cr_assert_eq(l->ncallers, 2);
	cr_assert_eq(l->ncallees, 0);
	/* The work->leaf edge reads the same from both ends. */
	const struct vw_func *w = &table.funcs[work];
	cr_assert_eq(w->ncallees, 1);
	cr_assert_eq(w->callees[0].func, (uint32_t)leaf);
	cr_assert_eq(w->callees[0].s.nc, 3);
	cr_assert_float_eq(w->callees[0].s.ct, 0.3, 1e-12);
	cr_assert_float_eq(table.total_tt, 3.1, 1e-12);
	cr_assert_eq(table.total_nc, 6);
}

Test(table, merging_adds_functions_and_edges_like_pstats_add)
{
	build(1);
	cr_assert_eq(table.nfuncs, 4);
	const struct vw_func *l = &table.funcs[find("leaf")];
	cr_assert_eq(l->s.nc, 11);
	cr_assert_eq(l->s.cc, 10);
	cr_assert_float_eq(l->s.tt, 1.6, 1e-12);
	cr_assert_float_eq(l->s.ct, 1.9, 1e-12);
	/* work->leaf: (3,3,.3,.3) + (2,1,.2,.5); main->leaf only in the first. */
	cr_assert_eq(l->ncallers, 2);
	int64_t work = find("work");
	for (uint32_t i = 0; i < l->ncallers; i++) {
		const struct cp_stat *s = &l->callers[i].s;
		if (l->callers[i].func == (uint32_t)work) {
			cr_assert_eq(s->nc, 5);
			cr_assert_eq(s->cc, 4);
			cr_assert_float_eq(s->ct, 0.8, 1e-12);
		} else {
			cr_assert_eq(s->nc, 1);
		}
	}
	cr_assert_eq(table.funcs[work].ncallees, 1);
	cr_assert_eq(table.funcs[find("work")].s.nc, 2);
	cr_assert_eq(vw_table_find(&table, &(struct cp_key){"b.py", 5, "other"}), find("other"));
	cr_assert_eq(vw_table_find(&table, &(struct cp_key){"b.py", 6, "other"}), -1);
}

Test(table, edges_to_unknown_callers_are_dropped)
{
	static struct cp_edge bad[] = {{7, {1, 1, 0.1, 0.1}}, {0, {1, 1, 0.1, 0.1}}};
	static struct cp_func f[] = {
	    {{"x", 1, "x"}, {1, 1, 0.1, 0.1}, NULL, 0},
	    {{"y", 1, "y"}, {2, 2, 0.2, 0.2}, bad, 2},
	};
	static const struct cp_stats st = {f, 2};
	const struct cp_stats *p = &st;
	cr_assert_eq(vw_table_build(&table, &p, 1), 0);
	cr_assert_eq(table.funcs[1].ncallers, 1);
	cr_assert_eq(table.funcs[1].callers[0].func, 0);
}

static uint32_t rows[8];

static const char *row_name(uint32_t i)
{
	return table.funcs[rows[i]].key.name;
}

Test(table, sorts_by_every_column_and_reverses)
{
	build(1);
	struct vw_query q = {VW_SORT_TTOT, 0, NULL};
	cr_assert_eq(vw_table_select(&table, &q, rows), 4);
	cr_assert_str_eq(row_name(0), "main"); /* ttot 3.4 */
	cr_assert_str_eq(row_name(1), "work"); /* 2.8 */
	cr_assert_str_eq(row_name(3), "other");
	q.sort = VW_SORT_TSUB;
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "work"); /* tsub 2.2 */
	q.sort = VW_SORT_NCALL;
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "leaf");
	q.sort = VW_SORT_NAME;
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "leaf");
	cr_assert_str_eq(row_name(3), "work");
	q.reverse = 1;
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "work");
	q = (struct vw_query){VW_SORT_TAVG, 0, NULL};
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "main"); /* 3.4 per call */
	q.sort = VW_SORT_FILE;
	vw_table_select(&table, &q, rows);
	cr_assert_str_eq(row_name(0), "main");	/* a.py:1 */
	cr_assert_str_eq(row_name(3), "other"); /* b.py:5 */
}

Test(table, filter_matches_name_or_file)
{
	build(1);
	struct vw_query q = {VW_SORT_NAME, 0, "ea"};
	cr_assert_eq(vw_table_select(&table, &q, rows), 1);
	cr_assert_str_eq(row_name(0), "leaf");
	q.filter = "b.py";
	cr_assert_eq(vw_table_select(&table, &q, rows), 1);
	cr_assert_str_eq(row_name(0), "other");
	q.filter = "zzz";
	cr_assert_eq(vw_table_select(&table, &q, rows), 0);
	q.filter = "";
	cr_assert_eq(vw_table_select(&table, &q, rows), 4);
}

Test(fmt, times_fit_their_width)
{
	char b[32];
	vw_fmt_time(b, sizeof(b), 0.000517, 8);
	cr_assert_str_eq(b, "0.000517");
	vw_fmt_time(b, sizeof(b), 12.5, 8);
	cr_assert_str_eq(b, "12.50000");
	vw_fmt_time(b, sizeof(b), 123456.25, 8);
	cr_assert_str_eq(b, "123456.2");
	vw_fmt_time(b, sizeof(b), 1e12, 8);
	cr_assert_leq(strlen(b), 8);
	cr_assert(strchr(b, 'e'));
}

Test(fmt, calls_and_places_read_like_pstats)
{
	char b[64];
	vw_fmt_calls(b, sizeof(b), &(struct cp_stat){1, 465, 0, 0});
	cr_assert_str_eq(b, "465/1");
	vw_fmt_calls(b, sizeof(b), &(struct cp_stat){3, 3, 0, 0});
	cr_assert_str_eq(b, "3");
	vw_fmt_where(b, sizeof(b), &(struct cp_key){"x.py", 12, "f"});
	cr_assert_str_eq(b, "x.py:12");
}

Test(fmt, fit_counts_utf8_characters_and_marks_cuts)
{
	char b[64];
	cr_assert_eq(vw_fit(b, sizeof(b), "h\xc3\xa9llo", 5, 0), 5);
	cr_assert_str_eq(b, "h\xc3\xa9llo");
	cr_assert_eq(vw_fit(b, sizeof(b), "h\xc3\xa9llo world", 5, 0), 5);
	cr_assert_str_eq(b, "h\xc3\xa9ll~");
	vw_fit(b, sizeof(b), "/usr/lib/python3/x.py:3", 8, 1);
	cr_assert_str_eq(b, "~/x.py:3");
}

Test(fmt, json_and_csv_escape)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	vw_put_json(f, "a\"b\\c\n");
	fputc(' ', f);
	vw_put_csv(f, "x,\"y\"");
	fputc(' ', f);
	vw_put_csv(f, "plain");
	fputc(' ', f);
	vw_put_json(f, "caf\xc3\xa9 \xff\xc3");
	fclose(f);
	cr_assert_str_eq(out, "\"a\\\"b\\\\c\\n\" \"x,\"\"y\"\"\" plain "
			      "\"caf\xc3\xa9 \\ufffd\\ufffd\"");
	free(out);
}

/* A model over two hand-built profiles: the second has extras with a task. */
static struct vw_model model;
static struct cp_task tasks[] = {
    {7, "worker", "asyncio", 99, 1.5, 3, "finished", {funcs1, 3}, 0, 0, 0, 0, 0, 0},
};
static struct cp_thread threads[] = {{99, "MainThread", 2.0, 5, NULL, 0}};

static void model_setup(void)
{
	struct cp_profile **p = calloc(2, sizeof(*p));
	const char **paths = calloc(2, sizeof(*paths));
	cr_assert(p && paths);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(cp_profile_new(&p[i]), 0);
	p[0]->stats = stats1;
	p[1]->stats = stats2;
	p[1]->ex = (struct cp_extras){.present = 1,
				      .clock = "cpu",
				      .mode = "trace",
				      .pid = 42,
				      .start = 10,
				      .stop = 12.5,
				      .tasks = tasks,
				      .ntasks = 1,
				      .threads = threads,
				      .nthreads = 1};
	paths[0] = "one.pstat";
	paths[1] = "two.pstat";
	cr_assert_eq(vw_model_from(&model, p, paths, 2), 0);
}

static void model_teardown(void)
{
	vw_model_free(&model);
}

TestSuite(model, .init = model_setup, .fini = model_teardown);

Test(model, merges_files_and_lists_their_tasks)
{
	cr_assert_eq(model.funcs.nfuncs, 4);
	cr_assert_str_eq(model.clock, "cpu");
	cr_assert_str_eq(model.mode, "trace");
	cr_assert_float_eq(model.duration, 2.5, 1e-12);
	cr_assert_eq(model.pid, 42);
	cr_assert_eq(model.ntasks, 1);
	cr_assert_eq(model.tasks[0].file, 1);
	cr_assert_eq(model.nthreads, 1);
	const struct vw_table *t = vw_model_task_table(&model, 0);
	cr_assert_not_null(t);
	cr_assert_eq(t->nfuncs, 3);
	cr_assert_eq(vw_model_task_table(&model, 0), t); /* built once */
}

Test(model, browser_goes_into_callers_and_back)
{
	struct vw_browser b;
	cr_assert_eq(vw_browser_init(&b, &model), 0);
	struct vw_screen *s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_FUNCS);
	cr_assert_str_eq(model.funcs.funcs[s->rows[0]].key.name, "main");
	/* Down to work (ttot 2.8), then in: work has one caller (main), one callee. */
	cr_assert_eq(vw_browser_act(&b, VW_DOWN, 10), 0);
	cr_assert_eq(vw_browser_act(&b, VW_ENTER, 10), 0);
	s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_EDGES);
	cr_assert_str_eq(model.funcs.funcs[s->func].key.name, "work");
	cr_assert_eq(s->ncallers, 1);
	cr_assert_eq(s->ncallees, 1);
	cr_assert_eq(s->cursor, 1); /* on the function itself */
	/* Onto the callee (leaf) and into it. */
	vw_browser_act(&b, VW_DOWN, 10);
	cr_assert_eq(vw_browser_act(&b, VW_ENTER, 10), 0);
	s = vw_browser_top(&b);
	cr_assert_str_eq(model.funcs.funcs[s->func].key.name, "leaf");
	cr_assert_eq(s->ncallers, 2);
	cr_assert_eq(b.depth, 3);
	/* Back twice: the function table with the cursor still on work. */
	vw_browser_act(&b, VW_BACK, 10);
	vw_browser_act(&b, VW_BACK, 10);
	vw_browser_act(&b, VW_BACK, 10); /* nothing before the first screen */
	s = vw_browser_top(&b);
	cr_assert_eq(b.depth, 1);
	cr_assert_str_eq(model.funcs.funcs[s->rows[s->cursor]].key.name, "work");
	vw_browser_free(&b);
}

Test(model, sort_and_filter_keep_the_cursor_on_its_function)
{
	struct vw_browser b;
	cr_assert_eq(vw_browser_init(&b, &model), 0);
	vw_browser_act(&b, VW_DOWN, 10); /* work */
	cr_assert_eq(vw_browser_sort(&b, VW_SORT_NAME), 0);
	struct vw_screen *s = vw_browser_top(&b);
	cr_assert_eq(s->cursor, 3); /* leaf main other work */
	cr_assert_eq(vw_browser_filter(&b, "a.py"), 0);
	cr_assert_eq(s->nrows, 3);
	cr_assert_str_eq(model.funcs.funcs[s->rows[s->cursor]].key.name, "work");
	cr_assert_eq(vw_browser_filter(&b, "nothing"), 0);
	cr_assert_eq(s->nrows, 0);
	cr_assert_eq(vw_browser_act(&b, VW_ENTER, 10), 0); /* no row: stays */
	cr_assert_eq(b.depth, 1);
	vw_browser_filter(&b, "");
	cr_assert_eq(s->nrows, 4);
	vw_browser_act(&b, VW_END, 10);
	cr_assert_eq(s->cursor, 3);
	vw_browser_act(&b, VW_PAGE_UP, 2);
	cr_assert_eq(s->cursor, 1);
	vw_browser_free(&b);
}

Test(model, task_view_opens_a_tasks_own_functions)
{
	struct vw_browser b;
	cr_assert_eq(vw_browser_init(&b, &model), 0);
	cr_assert_eq(vw_browser_act(&b, VW_TASKS, 10), 0);
	struct vw_screen *s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_TASKS);
	cr_assert_eq(s->nrows, 1);
	cr_assert_eq(vw_browser_act(&b, VW_ENTER, 10), 0);
	s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_FUNCS);
	cr_assert_eq(s->task, 0);
	cr_assert_eq(s->nrows, 3);
	cr_assert_eq(vw_browser_act(&b, VW_THREADS, 10), 0);
	s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_THREADS);
	cr_assert_eq(b.depth, 2);
	vw_browser_act(&b, VW_FUNCS, 10);
	cr_assert_eq(b.depth, 1);
	vw_browser_free(&b);
}

Test(model, scrolling_keeps_the_cursor_visible)
{
	struct vw_screen s = {.nrows = 100, .cursor = 50, .top = 0};
	vw_screen_scroll(&s, 20);
	cr_assert_eq(s.top, 31);
	s.cursor = 10;
	vw_screen_scroll(&s, 20);
	cr_assert_eq(s.top, 10);
	s.cursor = 99;
	vw_screen_scroll(&s, 200);
	cr_assert_eq(s.top, 0);
}

/* W: the whole-program tree starts at the writer's root, open two levels deep (the
 * root, then a node per thread and task, or, for a file without tables, its roots);
 * Enter, + and - open and close rows, and - on a closed row goes up. */
Test(model, tree_starts_at_the_whole_program_root)
{
	struct vw_browser b;
	cr_assert_eq(vw_browser_init(&b, &model), 0);
	cr_assert_eq(vw_browser_act(&b, VW_TREE, 10), 0);
	struct vw_screen *s = vw_browser_top(&b);
	cr_assert_eq(s->kind, VW_SCR_TREE);
	const struct vw_tree *tr = s->tree;
	cr_assert_str_eq(tr->t->funcs[tr->rows[0].func].key.name, "<whole program>");
	cr_assert(tr->rows[0].open);
	cr_assert_eq(s->nrows, tr->n);
	uint32_t nodes = 0;
	double sum = 0;
	for (uint32_t i = 1; i < tr->n; i++)
		if (tr->rows[i].depth == 1) {
			nodes++;
			sum += tr->rows[i].s.ct;
			cr_assert(i == 1 || tr->rows[i].s.ct <= tr->rows[i - 1].s.ct ||
				      tr->rows[i - 1].depth > 1,
				  "children come largest first");
		}
	cr_assert_geq(nodes, 3, "the thread's and the task's nodes, and file one's roots");
	cr_assert_float_eq(sum, tr->total, 1e-9, "the root is the sum of its children");
	/* Close the root, reopen it with +, close a child and go up with -. */
	cr_assert_eq(vw_browser_act(&b, VW_COLLAPSE, 10), 0);
	cr_assert_eq(s->nrows, 1);
	cr_assert_eq(vw_browser_act(&b, VW_EXPAND, 10), 0);
	cr_assert_eq(s->nrows, 1 + nodes);
	cr_assert_eq(vw_browser_act(&b, VW_DOWN, 10), 0);
	cr_assert_eq(vw_browser_act(&b, VW_ENTER, 10), 0);
	cr_assert_gt(s->nrows, 1 + nodes, "Enter opened the first child");
	cr_assert_eq(vw_browser_act(&b, VW_DOWN, 10), 0);
	cr_assert_eq(vw_browser_act(&b, VW_COLLAPSE, 10), 0);
	cr_assert_eq(s->cursor, 1, "- on a closed row goes to its parent");
	cr_assert_eq(vw_browser_act(&b, VW_COLLAPSE, 10), 0);
	cr_assert_eq(s->nrows, 1 + nodes);
	cr_assert_eq(vw_browser_act(&b, VW_BACK, 10), 0);
	cr_assert_eq(vw_browser_top(&b)->kind, VW_SCR_FUNCS);
	vw_browser_free(&b);
}
