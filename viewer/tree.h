/* tree.h: the whole-program tree of `coprof view`, with no curses in it. Rows are the
 * open part of a call tree that starts at "<whole program>" (libprof/whole.h, the root
 * snakeviz draws from the same file): each row is a function reached along a
 * caller->callee edge, with that edge's numbers, as snakeviz's icicle shows them.
 * Opening a row inserts its callees below it (largest ttot first); closing removes
 * them. Single-threaded. */
#ifndef VW_TREE_H
#define VW_TREE_H

#include <stdint.h>

#include "model.h"

struct vw_tnode {
	uint32_t func;	 /* index into the tree's table */
	uint32_t depth;	 /* 0 for the root */
	struct cp_stat s; /* the edge from the parent row; the root's own numbers */
	uint8_t open;	 /* its callees are the rows below it */
};

struct vw_tree {
	const struct vw_table *t;
	struct vw_tnode *rows;
	uint32_t n, cap;
	double total; /* s, the root's ttot: what the share column divides by */
};

/* A tree of one row, `root` of `t`, opened `levels` levels deep. 0 or -ENOMEM. */
int vw_tree_init(struct vw_tree *tr, const struct vw_table *t, uint32_t root, uint32_t levels);
void vw_tree_free(struct vw_tree *tr);

/* Opens row i (no-op when open or a leaf). 0 or -ENOMEM. */
int vw_tree_open(struct vw_tree *tr, uint32_t i);
/* Closes row i, removing every row below it that is deeper. */
void vw_tree_close(struct vw_tree *tr, uint32_t i);
/* The row of i's parent; i itself for the root. */
uint32_t vw_tree_parent(const struct vw_tree *tr, uint32_t i);

/* The model's whole-program table: every file's functions plus the synthetic ones
 * (whole.h), merged; built on first use. *root is "<whole program>". NULL: out of
 * memory. */
const struct vw_table *vw_model_whole(struct vw_model *m, uint32_t *root);

#endif
