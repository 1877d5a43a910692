/* test-file.h: helpers shared by the file layer's Criterion tests. */
#ifndef TEST_FILE_H
#define TEST_FILE_H

#include <stddef.h>

#include "profile.h"

/* Makes a fresh temporary directory and runs gen_foreign.py into it (cProfile, yappi
 * and marshal files made by the Python running the tests); fails the test if that
 * does not work. Writes the directory to dir. */
void foreign_files(char *dir, size_t len);
/* Removes a directory made by foreign_files or tmp_dir. */
void remove_dir(const char *dir);
/* A fresh empty temporary directory. */
void tmp_dir(char *dir, size_t len);
/* The whole content of a file (malloc'ed), or fails the test. */
unsigned char *slurp(const char *path, size_t *len);
/* The function keyed (file ending in `file_tail`, name) in `s`, or NULL. */
const struct cp_func *find_func(const struct cp_stats *s, const char *file_tail, const char *name);

#endif
