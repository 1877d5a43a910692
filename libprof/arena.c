/* arena.c: placeholder until its part lands. */
