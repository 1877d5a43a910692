/* engine.c: placeholder until its part lands. */
