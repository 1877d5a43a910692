/* snapshot.c: placeholder until its part lands. */
