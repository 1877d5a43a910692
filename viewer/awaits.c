/* awaits.c: `coprof report --awaits`: each file's await edges (the extras' 'awaits',
 * doc/format.md) as a forest: a root is a task that awaited others and that no task
 * awaited; under each task, the tasks it awaited, longest wait first (a task awaited by
 * several is under each). A root's critical path follows, from it, the longest wait at
 * each step. Reads the model's profiles; writes one stream; single-threaded. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "awaits.h"
#include "fmt.h"

/* Tree levels printed, and steps of a critical path, at most (a cycle stops sooner). */
#define MAX_DEPTH 32

struct node {
	uint64_t id;
	const char *name;     /* NULL: unknown */
	const char *fallback; /* for an unknown name: the task table's, by id alone */
	uint32_t *out;	      /* edge indexes, longest first */
	uint32_t nout;
	uint32_t nin;
	uint8_t on_path;  /* on the branch being printed (a cycle guard) */
	uint8_t expanded; /* its waits are printed already: shown once, so a graph of
			   * shared tasks prints in lines as many as its edges */
	double waited;	  /* s, its out edges' sum, to order roots */
};

struct graph {
	const struct cp_extras *ex;
	struct node *nodes;
	uint32_t nnodes;
	uint32_t *edge_from, *edge_to; /* node indexes per edge */
	uint32_t *outs;		       /* storage behind every node's out */
	uint32_t *roots;
	uint32_t nroots;
};

/* A node is a task: its id and its name (an id is an address, which a later task may
 * reuse; "Task-<n>" names are unique). NULL names sort first. */
static int node_cmp(uint64_t id, const char *name, const struct node *b)
{
	if (id != b->id)
		return id < b->id ? -1 : 1;
	if (!name || !b->name)
		return !b->name - !name;
	return strcmp(name, b->name);
}

static int by_id(const void *x, const void *y)
{
	const struct node *a = x;
	return node_cmp(a->id, a->name, y);
}

static uint32_t node_of(const struct graph *g, uint64_t id, const char *name)
{
	uint32_t lo = 0, hi = g->nnodes;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (node_cmp(id, name, &g->nodes[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct cp_extras *sort_ex; /* qsort's context: the file being sorted */

static int by_wait(const void *x, const void *y)
{
	const struct cp_await *a = &sort_ex->awaits[*(const uint32_t *)x];
	const struct cp_await *b = &sort_ex->awaits[*(const uint32_t *)y];
	if (a->seconds != b->seconds)
		return a->seconds > b->seconds ? -1 : 1;
	return a->awaited_id < b->awaited_id ? -1 : a->awaited_id > b->awaited_id;
}

static const struct node *root_sort_nodes;

static int by_waited(const void *x, const void *y)
{
	const struct node *a = &root_sort_nodes[*(const uint32_t *)x];
	const struct node *b = &root_sort_nodes[*(const uint32_t *)y];
	if (a->waited != b->waited)
		return a->waited > b->waited ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

static void graph_free(struct graph *g)
{
	free(g->nodes);
	free(g->edge_from);
	free(g->edge_to);
	free(g->outs);
	free(g->roots);
	memset(g, 0, sizeof(*g));
}

/* The graph of one file's edges. Names come from the edges, else from the file's task
 * table. 0 or -ENOMEM. */
static int graph_build(struct graph *g, const struct cp_extras *ex)
{
	uint32_t n = ex->nawaits;
	memset(g, 0, sizeof(*g));
	g->ex = ex;
	g->nodes = calloc(2 * (size_t)n + 1, sizeof(*g->nodes));
	g->edge_from = calloc(n + 1, sizeof(*g->edge_from));
	g->edge_to = calloc(n + 1, sizeof(*g->edge_to));
	g->outs = calloc(n + 1, sizeof(*g->outs));
	g->roots = calloc(2 * (size_t)n + 1, sizeof(*g->roots));
	if (!g->nodes || !g->edge_from || !g->edge_to || !g->outs || !g->roots) {
		graph_free(g);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		g->nodes[2 * i].id = ex->awaits[i].waiter_id;
		g->nodes[2 * i].name = ex->awaits[i].waiter;
		g->nodes[2 * i + 1].id = ex->awaits[i].awaited_id;
		g->nodes[2 * i + 1].name = ex->awaits[i].awaited;
	}
	qsort(g->nodes, 2 * (size_t)n, sizeof(*g->nodes), by_id);
	for (uint32_t i = 0; i < 2 * n; i++)
		if (!g->nnodes || by_id(&g->nodes[g->nnodes - 1], &g->nodes[i]) != 0)
			g->nodes[g->nnodes++] = g->nodes[i];
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_await *aw = &ex->awaits[i];
		struct node *w = &g->nodes[g->edge_from[i] = node_of(g, aw->waiter_id, aw->waiter)];
		struct node *a = &g->nodes[g->edge_to[i] = node_of(g, aw->awaited_id, aw->awaited)];
		w->nout++;
		w->waited += aw->seconds;
		a->nin++;
	}
	/* An unnamed node (NULL sorts first) takes its name from the task table. */
	for (uint32_t i = 0; i < ex->ntasks; i++) {
		uint32_t k = node_of(g, ex->tasks[i].id, NULL);
		if (k < g->nnodes && g->nodes[k].id == ex->tasks[i].id && !g->nodes[k].name)
			g->nodes[k].fallback = ex->tasks[i].name;
	}
	uint32_t at = 0;
	for (uint32_t k = 0; k < g->nnodes; k++) {
		g->nodes[k].out = g->outs + at;
		at += g->nodes[k].nout;
		g->nodes[k].nout = 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct node *w = &g->nodes[g->edge_from[i]];
		w->out[w->nout++] = i;
	}
	sort_ex = ex;
	for (uint32_t k = 0; k < g->nnodes; k++) {
		qsort(g->nodes[k].out, g->nodes[k].nout, sizeof(uint32_t), by_wait);
		if (!g->nodes[k].nin && g->nodes[k].nout)
			g->roots[g->nroots++] = k;
	}
	root_sort_nodes = g->nodes;
	qsort(g->roots, g->nroots, sizeof(*g->roots), by_waited);
	return 0;
}

static const char *shown_name(const struct node *nd)
{
	return nd->name ? nd->name : nd->fallback;
}

static void put_name(FILE *f, const struct node *nd)
{
	if (shown_name(nd))
		fprintf(f, "%s", vw_shown(shown_name(nd)));
	else
		fprintf(f, "task %" PRIu64, nd->id);
}

/* The waits of node k, and of the tasks it awaited in turn, one line an edge. */
static void put_tree(FILE *f, struct graph *g, uint32_t k, int depth)
{
	struct node *nd = &g->nodes[k];
	nd->on_path = 1;
	nd->expanded = 1;
	for (uint32_t j = 0; j < nd->nout; j++) {
		uint32_t e = nd->out[j];
		const struct cp_await *aw = &g->ex->awaits[e];
		struct node *to = &g->nodes[g->edge_to[e]];
		char name[256];
		if (shown_name(to))
			snprintf(name, sizeof(name), "%s", vw_shown(shown_name(to)));
		else
			snprintf(name, sizeof(name), "task %" PRIu64, to->id);
		int indent = 2 * (depth + 1);
		int width = 40 - indent > 8 ? 40 - indent : 8;
		const char *note = to->on_path		      ? "  (a cycle)"
				   : to->expanded && to->nout ? "  (its waits above)"
							      : "";
		fprintf(f, "%*s%-*s  %-9s %6" PRIu64 "x %10.3f s%s\n", indent, "", width, name,
			vw_shown(aw->kind ? aw->kind : "?"), aw->count, aw->seconds, note);
		if (!to->on_path && !to->expanded && depth + 1 < MAX_DEPTH)
			put_tree(f, g, g->edge_to[e], depth + 1);
	}
	nd->on_path = 0;
}

/* The critical path from root k: at each task, its longest wait, until a task that
 * awaited none (or a cycle). Its edges into path[], how many returned. */
static uint32_t critical_path(struct graph *g, uint32_t k, uint32_t *path)
{
	uint32_t n = 0;
	while (n < MAX_DEPTH && g->nodes[k].nout && !g->nodes[k].on_path) {
		g->nodes[k].on_path = 1;
		path[n++] = g->nodes[k].out[0];
		k = g->edge_to[path[n - 1]];
	}
	for (uint32_t i = 0; i < n; i++)
		g->nodes[g->edge_from[path[i]]].on_path = 0;
	return n;
}

static void put_json_name(FILE *f, const struct node *nd)
{
	if (shown_name(nd))
		vw_put_json(f, shown_name(nd));
	else
		fprintf(f, "null");
}

/* The dropped count for await edges that the file's extras hold, or 0. */
static uint64_t edges_dropped(const struct cp_extras *ex)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < ex->ndropped; i++)
		if (ex->dropped[i].name && strstr(ex->dropped[i].name, "await"))
			n += ex->dropped[i].n;
	return n;
}

/* What the printers below share across files: the stream, the roots shown so far and
 * their bound, the JSON items written so far. */
struct out {
	FILE *f;
	const struct vw_model *m;
	uint64_t limit, shown;
	uint32_t items;
};

/* Calls fn with the graph of each file that has edges. 0 or -ENOMEM. */
static int each_graph(struct out *o, void (*fn)(struct out *o, struct graph *g, uint32_t file))
{
	for (uint32_t i = 0; i < o->m->nprofiles; i++) {
		const struct cp_extras *ex = &o->m->profiles[i]->ex;
		struct graph g;
		if (!ex->nawaits)
			continue;
		if (graph_build(&g, ex))
			return -ENOMEM;
		fn(o, &g, i);
		graph_free(&g);
	}
	return 0;
}

/* Each root's tree and critical path, up to the limit of roots. */
static void text_file(struct out *o, struct graph *g, uint32_t file)
{
	(void)file;
	FILE *f = o->f;
	for (uint32_t r = 0; r < g->nroots && !(o->limit && o->shown >= o->limit); r++) {
		uint32_t k = g->roots[r], path[MAX_DEPTH];
		uint32_t n = critical_path(g, k, path);
		fprintf(f, "\n");
		put_name(f, &g->nodes[k]);
		fprintf(f, "\n");
		put_tree(f, g, k, 0);
		fprintf(f, "  critical path: ");
		put_name(f, &g->nodes[k]);
		for (uint32_t s = 0; s < n; s++) {
			fprintf(f, " > ");
			put_name(f, &g->nodes[g->edge_to[path[s]]]);
			fprintf(f, " %.3f s", g->ex->awaits[path[s]].seconds);
		}
		fprintf(f, "\n");
		o->shown++;
	}
}

/* One edge a row. */
static void csv_file(struct out *o, struct graph *g, uint32_t file)
{
	for (uint32_t e = 0; e < g->ex->nawaits; e++) {
		const struct cp_await *aw = &g->ex->awaits[e];
		const struct node *w = &g->nodes[g->edge_from[e]], *a = &g->nodes[g->edge_to[e]];
		fprintf(o->f, "%" PRIu64 ",", w->id);
		vw_put_csv(o->f, shown_name(w) ? shown_name(w) : "");
		fprintf(o->f, ",%" PRIu64 ",", a->id);
		vw_put_csv(o->f, shown_name(a) ? shown_name(a) : "");
		fprintf(o->f, ",%s,%" PRIu64 ",%.9g,%" PRIu64 ",", aw->kind ? aw->kind : "",
			aw->count, aw->seconds, aw->thread);
		vw_put_csv(o->f, o->m->paths[file]);
		fprintf(o->f, "\n");
	}
}

static void json_edges(struct out *o, struct graph *g, uint32_t file)
{
	(void)file;
	FILE *f = o->f;
	for (uint32_t e = 0; e < g->ex->nawaits; e++) {
		const struct cp_await *aw = &g->ex->awaits[e];
		fprintf(f,
			"%s\n    {\"waiter_id\": %" PRIu64 ", \"waiter\": ", o->items++ ? "," : "",
			g->nodes[g->edge_from[e]].id);
		put_json_name(f, &g->nodes[g->edge_from[e]]);
		fprintf(f,
			", \"awaited_id\": %" PRIu64 ", \"awaited\": ", g->nodes[g->edge_to[e]].id);
		put_json_name(f, &g->nodes[g->edge_to[e]]);
		fprintf(f, ", \"kind\": ");
		vw_put_json(f, aw->kind ? aw->kind : "");
		fprintf(f, ", \"count\": %" PRIu64 ", \"seconds\": %.9g, \"thread\": %" PRIu64 "}",
			aw->count, aw->seconds, aw->thread);
	}
}

static void json_paths(struct out *o, struct graph *g, uint32_t file)
{
	(void)file;
	FILE *f = o->f;
	for (uint32_t r = 0; r < g->nroots && !(o->limit && o->shown >= o->limit); r++) {
		uint32_t k = g->roots[r], path[MAX_DEPTH];
		uint32_t n = critical_path(g, k, path);
		fprintf(f, "%s\n    {\"root_id\": %" PRIu64 ", \"root\": ", o->items++ ? "," : "",
			g->nodes[k].id);
		put_json_name(f, &g->nodes[k]);
		fprintf(f, ", \"path\": [");
		for (uint32_t s = 0; s < n; s++) {
			const struct cp_await *aw = &g->ex->awaits[path[s]];
			const struct node *to = &g->nodes[g->edge_to[path[s]]];
			fprintf(f, "%s{\"id\": %" PRIu64 ", \"name\": ", s ? ", " : "", to->id);
			put_json_name(f, to);
			fprintf(f, ", \"kind\": ");
			vw_put_json(f, aw->kind ? aw->kind : "");
			fprintf(f, ", \"seconds\": %.9g}", aw->seconds);
		}
		fprintf(f, "]}");
		o->shown++;
	}
}

int vw_print_awaits(FILE *f, const struct vw_model *m, enum vw_awaits_format fmt, uint64_t limit)
{
	struct out o = {.f = f, .m = m, .limit = limit};
	uint32_t nedges = 0;
	uint64_t dropped = 0;
	for (uint32_t i = 0; i < m->nprofiles; i++) {
		nedges += m->profiles[i]->ex.nawaits;
		dropped += edges_dropped(&m->profiles[i]->ex);
	}
	if (fmt == VW_AWAITS_CSV) {
		fprintf(f, "waiter_id,waiter,awaited_id,awaited,kind,count,seconds,thread,file\n");
		return each_graph(&o, csv_file);
	}
	if (fmt == VW_AWAITS_JSON) {
		fprintf(f, "{\"dropped\": %" PRIu64 ", \"edges\": [", dropped);
		if (each_graph(&o, json_edges))
			return -ENOMEM;
		fprintf(f, "%s], \"critical_paths\": [", o.items ? "\n  " : "");
		o.items = 0;
		if (each_graph(&o, json_paths))
			return -ENOMEM;
		fprintf(f, "%s]}", o.items ? "\n  " : "");
		return 0;
	}
	fprintf(f,
		"Awaits: %" PRIu32 " edges (who awaited whom, wall time waited under either "
		"clock)\n",
		nedges);
	if (dropped)
		fprintf(f,
			"  %" PRIu64 " waits let go (the edge table keeps the longer half when "
			"full)\n",
			dropped);
	if (!nedges)
		fprintf(f,
			"  none (asyncio tasks in trace mode, by coprof files written since they "
			"exist)\n");
	return each_graph(&o, text_file);
}
