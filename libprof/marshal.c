/* marshal.c: placeholder until its part lands. */
