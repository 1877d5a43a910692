/* browse.h: the state of `coprof view`, with no curses in it: a stack of screens
 * (function table, callers/callees of one function, tasks, threads, the whole-program
 * tree, stalls), the cursor on
 * each, and the sort and filter every function list shares. The UI (cmd-view.c,
 * view-draw.c) maps keys to actions and draws what this holds. Single-threaded. */
#ifndef VW_BROWSE_H
#define VW_BROWSE_H

#include <stdint.h>

#include "model.h"
#include "tree.h"

enum vw_screen_kind {
	VW_SCR_FUNCS,	/* a function table: the merged one, or one task's */
	VW_SCR_EDGES,	/* callers, the function itself, callees */
	VW_SCR_TASKS,	/* the task table */
	VW_SCR_THREADS, /* the thread table */
	VW_SCR_TREE,	/* the whole-program tree (tree.h) */
	VW_SCR_STALLS,	/* the stalls, longest first */
};

struct vw_screen {
	enum vw_screen_kind kind;
	const struct vw_table *table; /* FUNCS, EDGES */
	int64_t task;		      /* FUNCS of one task: its index; else -1 */
	uint32_t func;		      /* EDGES: the function shown */
	uint32_t *rows; /* FUNCS: function indexes; TASKS, THREADS, STALLS: indexes */
	struct vw_edge *edges;	      /* EDGES: ncallers callers, then ncallees callees */
	uint32_t ncallers, ncallees;
	uint32_t nrows; /* EDGES: ncallers + 1 + ncallees, the function in the middle */
	struct vw_tree *tree; /* TREE: its rows are the screen's rows */
	uint32_t cursor, top;
};

enum vw_action {
	VW_UP,
	VW_DOWN,
	VW_PAGE_UP,
	VW_PAGE_DOWN,
	VW_HOME,
	VW_END,
	VW_ENTER,   /* into a function's callers/callees, a caller or callee, a task */
	VW_BACK,    /* to the screen before; nothing on the first */
	VW_REVERSE, /* flip the sort order */
	VW_FUNCS,   /* start over on the merged function table */
	VW_TASKS,   /* start over on the task table */
	VW_THREADS, /* start over on the thread table */
	VW_TREE,    /* start over on the whole-program tree */
	VW_STALLS,  /* start over on the stalls */
	VW_EXPAND,  /* tree: open the row */
	VW_COLLAPSE, /* tree: close the row, or go to its parent when closed */
};

struct vw_browser {
	struct vw_model *m;
	struct vw_query q;
	char filter[256];
	struct vw_screen *stack;
	uint32_t depth, cap;
	const char *note; /* one line for the status bar, until the next action */
};

/* Starts on the merged function table, sorted by ttot. 0 or -ENOMEM. */
int vw_browser_init(struct vw_browser *b, struct vw_model *m);
void vw_browser_free(struct vw_browser *b);

static inline struct vw_screen *vw_browser_top(struct vw_browser *b)
{
	return &b->stack[b->depth - 1];
}

/* Does `a`; `page` is how many rows the screen shows (for page moves). 0 or -ENOMEM. */
int vw_browser_act(struct vw_browser *b, enum vw_action a, uint32_t page);

/* Sorts every function list by `s` (numbers largest first), keeping the cursor on the
 * same row. */
int vw_browser_sort(struct vw_browser *b, enum vw_sort s);

/* Keeps the function tables' rows whose name or file contains `text` ("" for all). */
int vw_browser_filter(struct vw_browser *b, const char *text);

/* Moves `top` so that the cursor is within the `height` rows shown. */
void vw_screen_scroll(struct vw_screen *s, uint32_t height);

#endif
