/* view-draw.h: draws the browser's top screen with curses; it only draws. */
#ifndef VW_VIEW_DRAW_H
#define VW_VIEW_DRAW_H

#include <stdint.h>

#include "browse.h"

struct vw_ui {
	int color;	    /* 0 under NO_COLOR or on a terminal without colours */
	int help;	    /* the help screen is up */
	const char *prompt; /* non-NULL while a filter is being typed: its text so far */
};

/* Sets up the colour pairs when ui->color; call once after initscr. */
void vw_draw_init(const struct vw_ui *ui);

/* How many list rows fit on the screen now (it follows resizes). */
uint32_t vw_draw_rows(void);

/* Draws everything: header, the top screen's title, columns and rows, the key bar (or
 * the filter prompt), and the help screen over it if it is up. */
void vw_draw(struct vw_browser *b, const struct vw_ui *ui);

#endif
