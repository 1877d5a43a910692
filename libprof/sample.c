/* sample.c: placeholder until its part lands. */
