/* pstat-write.c: placeholder until its part lands. */
