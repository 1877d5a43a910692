/* grow.h: room in a malloc'd array that doubles as it fills (the file layer's, the
 * snapshot's and the sample store's tables). */
#ifndef CP_GROW_H
#define CP_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes room for `need` elements of `elem` bytes in *arrp, whose capacity is *cap:
 * `first` elements at first, then doubling. 0 or -ENOMEM (the array is left as it
 * was). */
static inline int cp_grow(void *arrp, uint32_t *cap, uint32_t need, size_t elem, uint32_t first)
{
	if (need <= *cap)
		return 0;
	uint32_t ncap = *cap ? *cap : first;
	while (ncap < need)
		ncap *= 2;
	void *n = realloc(*(void **)arrp, (size_t)ncap * elem);
	if (!n)
		return -ENOMEM;
	*(void **)arrp = n;
	*cap = ncap;
	return 0;
}

#endif
