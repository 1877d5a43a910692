/* pstat-read.c: placeholder until its part lands. */
