/* test-pstat.c: the pstats writer and reader (libprof/pstat-write.c, pstat-read.c):
 * round trips through the API, files of cProfile and yappi made at test time. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sample-profile.h"
#include "test-file.h"

void tmp_dir(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/coprof-file-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

void remove_dir(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

void foreign_files(char *dir, size_t len)
{
	char cmd[1024];

	cr_assert(TEST_PYTHON[0], "no python3 found at configure time");
	tmp_dir(dir, len);
	snprintf(cmd, sizeof(cmd), "'%s' '%s/gen_foreign.py' '%s' >/dev/null", TEST_PYTHON,
		 FILE_TESTS_DIR, dir);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

const struct cp_func *find_func(const struct cp_stats *s, const char *file_tail, const char *name)
{
	size_t tl = strlen(file_tail);

	for (uint32_t i = 0; i < s->nfuncs; i++) {
		const struct cp_key *k = &s->funcs[i].key;
		size_t fl = strlen(k->file);
		if (strcmp(k->name, name) == 0 && fl >= tl &&
		    strcmp(k->file + fl - tl, file_tail) == 0)
			return &s->funcs[i];
	}
	return NULL;
}

static double sane(double d)
{
	return isfinite(d) ? d : 0.0;
}

static void expect_str(const char *a, const char *b, const char *what)
{
	cr_expect_str_eq(a ? a : "", b ? b : "", "%s", what);
}

static void expect_stat(const struct cp_stat *got, const struct cp_stat *want)
{
	cr_expect_eq(got->cc, want->cc);
	cr_expect_eq(got->nc, want->nc);
	cr_expect_eq(got->tt, sane(want->tt));
	cr_expect_eq(got->ct, sane(want->ct));
}

/* Equal after a round trip: same functions in the same order, same edges. */
static void expect_stats_equal(const struct cp_stats *got, const struct cp_stats *want)
{
	cr_assert_eq(got->nfuncs, want->nfuncs);
	for (uint32_t i = 0; i < want->nfuncs; i++) {
		const struct cp_func *g = &got->funcs[i], *w = &want->funcs[i];
		expect_str(g->key.file, w->key.file, "file");
		expect_str(g->key.name, w->key.name, "name");
		cr_expect_eq(g->key.line, w->key.line);
		expect_stat(&g->s, &w->s);
		cr_assert_eq(g->ncallers, w->ncallers, "callers of %s", w->key.name);
		for (uint32_t j = 0; j < w->ncallers; j++) {
			cr_expect_eq(g->callers[j].caller, w->callers[j].caller);
			expect_stat(&g->callers[j].s, &w->callers[j].s);
		}
	}
}

static void expect_profiles_equal(const struct cp_profile *got, const struct cp_profile *want)
{
	const struct cp_extras *g = &got->ex, *w = &want->ex;

	expect_stats_equal(&got->stats, &want->stats);
	cr_expect_eq(g->present, 1);
	cr_expect_eq(g->version, CP_FORMAT_VERSION);
	expect_str(g->clock, w->clock, "clock");
	expect_str(g->mode, w->mode, "mode");
	cr_expect_eq(g->pid, w->pid);
	cr_assert_eq(g->argc, w->argc);
	for (uint32_t i = 0; i < w->argc; i++)
		expect_str(g->argv[i], w->argv[i], "argv");
	cr_expect_eq(g->start, w->start);
	cr_expect_eq(g->stop, w->stop);
	cr_expect_eq(g->hz, w->hz);
	cr_expect_eq(g->overflow, w->overflow);
	cr_assert_eq(g->ndropped, w->ndropped);
	for (uint32_t i = 0; i < w->ndropped; i++) {
		expect_str(g->dropped[i].name, w->dropped[i].name, "dropped");
		cr_expect_eq(g->dropped[i].n, w->dropped[i].n);
	}
	cr_assert_eq(g->nnotes, w->nnotes);
	for (uint32_t i = 0; i < w->nnotes; i++)
		expect_str(g->notes[i], w->notes[i], "notes");
	cr_assert_eq(g->ntasks, w->ntasks);
	for (uint32_t i = 0; i < w->ntasks; i++) {
		const struct cp_task *a = &g->tasks[i], *b = &w->tasks[i];
		cr_expect_eq(a->id, b->id);
		expect_str(a->name, b->name, "task name");
		expect_str(a->runtime, b->runtime, "runtime");
		cr_expect_eq(a->thread, b->thread);
		cr_expect_eq(a->ttot, b->ttot);
		cr_expect_eq(a->resumes, b->resumes);
		expect_str(a->state, b->state, "state");
		cr_expect_eq(a->timed, b->timed, "task %u timed", i);
		if (b->timed) {
			cr_expect_eq(a->run_cpu, b->run_cpu);
			cr_expect_eq(a->run_wall, b->run_wall);
			cr_expect_eq(a->ready, b->ready);
			cr_expect_eq(a->ready_max, b->ready_max);
			cr_expect_eq(a->waiting, b->waiting);
		}
		expect_stats_equal(&a->stats, &b->stats);
	}
	cr_assert_eq(g->nthreads, w->nthreads);
	for (uint32_t i = 0; i < w->nthreads; i++) {
		cr_expect_eq(g->threads[i].tid, w->threads[i].tid);
		expect_str(g->threads[i].name, w->threads[i].name, "thread name");
		cr_expect_eq(g->threads[i].ttot, w->threads[i].ttot);
		cr_expect_eq(g->threads[i].switches, w->threads[i].switches);
	}
	cr_assert_eq(g->nstacks, w->nstacks);
	for (uint32_t i = 0; i < w->nstacks; i++) {
		const struct cp_stack *a = &g->stacks[i], *b = &w->stacks[i];
		cr_expect_eq(a->task, b->task);
		cr_expect_eq(a->thread, b->thread);
		cr_expect_eq(a->count, b->count);
		cr_expect_eq(a->waiting, b->waiting);
		cr_assert_eq(a->depth, b->depth);
		for (uint32_t j = 0; j < b->depth; j++)
			cr_expect_eq(a->frames[j], b->frames[j]);
	}
}

Test(pstat, round_trip_keeps_everything)
{
	struct cp_profile *p, *q;
	char dir[64], path[128], err[256];

	cr_assert_eq(sample_profile(&p), 0);
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/sample.pstat", dir);
	cr_assert_eq(cp_profile_write(p, path), 0);
	cr_assert_eq(cp_profile_read(path, &q, err, sizeof(err)), 0, "%s", err);
	expect_profiles_equal(q, p);
	cp_profile_free(q);
	cp_profile_free(p);
	remove_dir(dir);
}

Test(pstat, encode_gives_the_bytes_written)
{
	struct cp_profile *p;
	unsigned char *buf, *file;
	size_t len, flen;
	char dir[64], path[128];

	cr_assert_eq(sample_profile(&p), 0);
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/x.pstat", dir);
	cr_assert_eq(cp_profile_write(p, path), 0);
	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	file = slurp(path, &flen);
	cr_assert_eq(len, flen);
	cr_expect_eq(memcmp(buf, file, len), 0);
	free(buf);
	free(file);
	cp_profile_free(p);
	remove_dir(dir);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(pstat, write_replaces_the_file_and_leaves_no_temporary)
{
	struct cp_profile *p, *empty, *q;
	char dir[64], path[160], err[256];

	cr_assert_eq(sample_profile(&p), 0);
	cr_assert_eq(cp_profile_new(&empty), 0);
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/out.pstat", dir);
	cr_assert_eq(cp_profile_write(p, path), 0);
	cr_assert_eq(cp_profile_write(empty, path), 0);
	cr_expect_eq(count_entries(dir), 1);
	cr_assert_eq(cp_profile_read(path, &q, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(q->stats.nfuncs, 0);
	cr_expect_eq(q->ex.present, 1);
	cp_profile_free(q);
	snprintf(path, sizeof(path), "%s/missing/out.pstat", dir);
	cr_expect_eq(cp_profile_write(p, path), -ENOENT);
	cr_expect_eq(count_entries(dir), 1);
	cp_profile_free(empty);
	cp_profile_free(p);
	remove_dir(dir);
}

/* A big profile: n functions, each called by the previous one. */
static struct cp_profile *chain_profile(uint32_t n)
{
	struct cp_profile *p;
	char name[32];

	cr_assert_eq(cp_profile_new(&p), 0);
	p->stats.funcs = cp_arena_alloc(p->arena, n * sizeof(struct cp_func));
	cr_assert_not_null(p->stats.funcs);
	p->stats.nfuncs = n;
	for (uint32_t i = 0; i < n; i++) {
		struct cp_func *f = &p->stats.funcs[i];
		snprintf(name, sizeof(name), "f%u", (unsigned)i);
		f->key =
		    (struct cp_key){"chain.c", i, cp_arena_strdup(p->arena, name, strlen(name))};
		f->s = (struct cp_stat){1, 1, 0.5, 1.0};
		if (i == 0)
			continue;
		f->callers = cp_arena_alloc(p->arena, sizeof(struct cp_edge));
		f->callers[0] = (struct cp_edge){i - 1, {1, 1, 0.5, 1.0}};
		f->ncallers = 1;
	}
	return p;
}

/* A writer killed at any moment leaves the old file whole, never half a new one. */
Test(pstat, killed_writer_never_leaves_half_a_file, .timeout = 60)
{
	struct cp_profile *small, *big, *q;
	char dir[64], path[128], err[256];

	cr_assert_eq(sample_profile(&small), 0);
	big = chain_profile(200000);
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/out.pstat", dir);
	cr_assert_eq(cp_profile_write(small, path), 0);
	for (int round = 0; round < 8; round++) {
		pid_t pid = fork();
		cr_assert_neq(pid, -1);
		if (pid == 0) {
			for (;;)
				cp_profile_write(big, path);
		}
		usleep(20000 + 15000 * (useconds_t)round);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cr_assert_eq(cp_profile_read(path, &q, err, sizeof(err)), 0, "round %d: %s", round,
			     err);
		cr_expect(q->stats.nfuncs == small->stats.nfuncs || q->stats.nfuncs == 200000,
			  "round %d: %u functions", round, (unsigned)q->stats.nfuncs);
		cp_profile_free(q);
	}
	/* Killed mid-write, the writers left their temporary files behind. */
	cr_expect_gt(count_entries(dir), 1);
	cp_profile_free(big);
	cp_profile_free(small);
	remove_dir(dir);
}

/* Encodes p and reads the bytes back, failing the test if either step fails. */
static struct cp_profile *encode_and_read(const struct cp_profile *p)
{
	struct cp_profile *q;
	unsigned char *buf;
	size_t len;
	char err[256];

	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	cr_assert_eq(cp_profile_read_mem(buf, len, &q, err, sizeof(err)), 0, "%s", err);
	free(buf);
	return q;
}

Test(pstat, duplicate_keys_are_merged)
{
	struct cp_profile *p, *q;
	struct cp_func *f;

	cr_assert_eq(cp_profile_new(&p), 0);
	f = cp_arena_alloc(p->arena, 3 * sizeof(*f));
	p->stats.funcs = f;
	p->stats.nfuncs = 3;
	f[0] = (struct cp_func){{"m.so", 0, "helper"}, {1, 2, 0.5, 1.0}, NULL, 0};
	f[1] = (struct cp_func){{"m.so", 0, "main"}, {1, 1, 1.0, 3.0}, NULL, 0};
	f[2] = (struct cp_func){{"m.so", 0, "helper"}, {3, 4, 0.25, 0.5}, NULL, 0};
	f[0].callers = cp_arena_alloc(p->arena, sizeof(struct cp_edge));
	f[0].callers[0] = (struct cp_edge){1, {1, 2, 0.5, 1.0}};
	f[0].ncallers = 1;
	f[2].callers = cp_arena_alloc(p->arena, 2 * sizeof(struct cp_edge));
	f[2].callers[0] = (struct cp_edge){1, {2, 3, 0.125, 0.25}};
	f[2].callers[1] = (struct cp_edge){2, {1, 1, 0.125, 0.25}};
	f[2].ncallers = 2;
	q = encode_and_read(p);
	cr_assert_eq(q->stats.nfuncs, 2);
	f = &q->stats.funcs[0];
	cr_expect_str_eq(f->key.name, "helper");
	cr_expect_eq(f->s.cc, 4);
	cr_expect_eq(f->s.nc, 6);
	cr_expect_eq(f->s.tt, 0.75);
	cr_expect_eq(f->s.ct, 1.5);
	cr_assert_eq(f->ncallers, 2);
	cr_expect_eq(f->callers[0].caller, 1);
	cr_expect_eq(f->callers[0].s.nc, 5);
	cr_expect_eq(f->callers[0].s.cc, 3);
	cr_expect_eq(f->callers[0].s.ct, 1.25);
	cr_expect_eq(f->callers[1].caller, 0);
	cr_expect_eq(f->callers[1].s.nc, 1);
	cp_profile_free(q);
	cp_profile_free(p);
}

/* Found by the fuzzer: "a\xffpy" and "a\xef\xbf\xbdpy" are one key once the invalid
 * byte is written as U+FFFD, so the writer must merge them, or the file would hold a
 * key twice and fail to read back. */
Test(pstat, keys_equal_after_utf8_repair_are_merged)
{
	struct cp_profile *p, *q;
	struct cp_func *f;

	cr_assert_eq(cp_profile_new(&p), 0);
	f = cp_arena_alloc(p->arena, 2 * sizeof(*f));
	p->stats.funcs = f;
	p->stats.nfuncs = 2;
	f[0] = (struct cp_func){{"a\xffpy", 1, "main"}, {1, 1, 0.5, 1.0}, NULL, 0};
	f[1] = (struct cp_func){{"a\xef\xbf\xbdpy", 1, "main"}, {2, 2, 0.25, 0.5}, NULL, 0};
	q = encode_and_read(p);
	cr_assert_eq(q->stats.nfuncs, 1);
	cr_expect_str_eq(q->stats.funcs[0].key.file, "a\xef\xbf\xbdpy");
	cr_expect_eq(q->stats.funcs[0].s.nc, 3);
	cr_expect_eq(q->stats.funcs[0].s.tt, 0.75);
	cp_profile_free(q);
	cp_profile_free(p);
}

Test(pstat, a_caller_listed_twice_is_merged)
{
	struct cp_profile *p, *q;
	struct cp_func *f;
	unsigned char *buf;
	size_t len;
	char err[256];

	cr_assert_eq(cp_profile_new(&p), 0);
	f = cp_arena_alloc(p->arena, 2 * sizeof(*f));
	p->stats.funcs = f;
	p->stats.nfuncs = 2;
	f[0] = (struct cp_func){{"a.c", 1, "main"}, {1, 1, 1.0, 2.0}, NULL, 0};
	f[1] = (struct cp_func){{"a.c", 2, "leaf"}, {5, 5, 1.0, 1.0}, NULL, 0};
	f[1].callers = cp_arena_alloc(p->arena, 2 * sizeof(struct cp_edge));
	f[1].callers[0] = (struct cp_edge){0, {2, 2, 0.5, 0.5}};
	f[1].callers[1] = (struct cp_edge){0, {3, 3, 0.5, 0.5}};
	f[1].ncallers = 2;
	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	cr_assert_eq(cp_profile_read_mem(buf, len, &q, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(q->stats.nfuncs, 2);
	f = &q->stats.funcs[1];
	cr_assert_eq(f->ncallers, 1);
	cr_expect_eq(f->callers[0].caller, 0);
	cr_expect_eq(f->callers[0].s.nc, 5);
	cr_expect_eq(f->callers[0].s.tt, 1.0);
	free(buf);
	cp_profile_free(q);
	cp_profile_free(p);
}

Test(pstat, bad_indices_are_rejected_and_write_nothing)
{
	struct cp_profile *p;
	char dir[64], path[128];
	uint32_t saved;

	cr_assert_eq(sample_profile(&p), 0);
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/bad.pstat", dir);
	saved = p->stats.funcs[1].callers[0].caller;
	p->stats.funcs[1].callers[0].caller = p->stats.nfuncs;
	cr_expect_eq(cp_profile_write(p, path), -EINVAL);
	p->stats.funcs[1].callers[0].caller = saved;
	p->ex.stacks[0].frames[0] = 99;
	cr_expect_eq(cp_profile_write(p, path), -EINVAL);
	p->ex.stacks[0].frames[0] = 2;
	p->ex.stacks[1].task = 2;
	cr_expect_eq(cp_profile_write(p, path), -EINVAL);
	p->ex.stacks[1].task = 1;
	cr_expect_eq(count_entries(dir), 0);
	cr_expect_eq(cp_profile_write(p, path), 0);
	cp_profile_free(p);
	remove_dir(dir);
}

Test(pstat, invalid_utf8_is_repaired)
{
	struct cp_profile *p, *q;
	unsigned char *buf;
	size_t len;
	char err[256];

	cr_assert_eq(cp_profile_new(&p), 0);
	p->stats.funcs = cp_arena_alloc(p->arena, sizeof(struct cp_func));
	p->stats.nfuncs = 1;
	p->stats.funcs[0].key = (struct cp_key){"bad\xff.c", 1, "f\xc3(\xed\xa0\x80"};
	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	cr_assert_eq(cp_profile_read_mem(buf, len, &q, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(q->stats.funcs[0].key.file, "bad\xef\xbf\xbd.c");
	cr_expect_str_eq(q->stats.funcs[0].key.name,
			 "f\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	free(buf);
	cp_profile_free(q);
	cp_profile_free(p);
}

/* Checks what every well-formed pstats profile satisfies. */
static void expect_consistent(const struct cp_profile *p)
{
	for (uint32_t i = 0; i < p->stats.nfuncs; i++) {
		const struct cp_func *f = &p->stats.funcs[i];
		cr_expect(f->s.cc <= f->s.nc);
		cr_expect(f->s.tt >= 0 && f->s.ct >= 0);
		for (uint32_t j = 0; j < f->ncallers; j++)
			cr_expect(f->callers[j].caller < p->stats.nfuncs);
	}
}

Test(pstat, reads_cprofile_output)
{
	char dir[64], path[128], err[256];
	const struct cp_func *f;
	struct cp_profile *p;
	double tt = 0;

	foreign_files(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/cprofile.pstat", dir);
	cr_assert_eq(cp_profile_read(path, &p, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(p->ex.present, 0);
	expect_consistent(p);
	f = find_func(&p->stats, "prog_work.py", "fib");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 3 * 1973);
	cr_expect_eq(f->s.cc, 3);
	cr_expect_eq(f->key.line, 5);
	cr_expect_eq(f->ncallers, 2); /* work and fib itself */
	f = find_func(&p->stats, "prog_work.py", "leaf");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 9000);
	cr_expect_eq(f->ncallers, 1);
	cr_expect_str_eq(p->stats.funcs[f->callers[0].caller].key.name, "work");
	cr_expect_eq(f->callers[0].s.nc, 9000);
	f = find_func(&p->stats, "~", "<built-in method builtins.len>");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 3);
	f = find_func(&p->stats, "prog_work.py", "main");
	cr_assert_not_null(f);
	cr_expect(f->s.ct > 0 && f->s.ct < 60);
	for (uint32_t i = 0; i < p->stats.nfuncs; i++)
		tt += p->stats.funcs[i].s.tt;
	cr_expect(tt >= f->s.ct * 0.9, "own times sum to %g, main's ct is %g", tt, f->s.ct);
	cp_profile_free(p);
	remove_dir(dir);
}

Test(pstat, reads_yappi_output)
{
	char dir[64], path[128], err[256];
	const struct cp_func *f;
	struct cp_profile *p;

	foreign_files(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/yappi.pstat", dir);
	cr_assert_eq(cp_profile_read(path, &p, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(p->ex.present, 0);
	expect_consistent(p);
	f = find_func(&p->stats, "prog_work.py", "fib");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 3 * 1973);
	cr_expect_eq(f->s.cc, 3);
	f = find_func(&p->stats, "prog_work.py", "leaf");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 9000);
	cr_expect(f->s.ct >= f->s.tt);
	f = find_func(&p->stats, "prog_work.py", "work");
	cr_assert_not_null(f);
	cr_expect_eq(f->s.nc, 3);
	cr_expect(f->s.ct > 0 && f->s.ct < 60);
	cp_profile_free(p);
	remove_dir(dir);
}

Test(pstat, reads_every_marshal_version)
{
	char dir[64], path[128], err[256];
	const struct cp_func *f;
	struct cp_profile *p;

	foreign_files(dir, sizeof(dir));
	for (int v = 0; v <= 4; v++) {
		snprintf(path, sizeof(path), "%s/marshal-v%d.pstat", dir, v);
		cr_assert_eq(cp_profile_read(path, &p, err, sizeof(err)), 0, "v%d: %s", v, err);
		cr_expect_eq(p->stats.nfuncs, 6, "v%d", v);
		expect_consistent(p);
		f = find_func(&p->stats, "b\xc3\xa9.py", "big\xe4\xb8\xad");
		cr_assert_not_null(f, "v%d", v);
		cr_expect_eq(f->key.line, (1ULL << 31) + 5);
		cr_expect_eq(f->s.cc, 1ULL << 33);
		cr_expect_eq(f->s.nc, 1ULL << 40);
		cr_expect_eq(f->s.tt, 1e-9);
		cr_expect_eq(f->s.ct, 2.5);
		cr_assert_eq(f->ncallers, 1);
		cr_expect_str_eq(p->stats.funcs[f->callers[0].caller].key.name, "fib");
		cr_expect_eq(f->callers[0].s.nc, 1ULL << 40);
		cr_expect_eq(f->callers[0].s.cc, 1ULL << 33);
		f = find_func(&p->stats, "a.py", "fib");
		cr_assert_not_null(f);
		cr_expect_eq(f->s.tt, 0.25, "v%d", v);
		cr_expect_eq(f->ncallers, 2);
		cp_profile_free(p);
	}
	remove_dir(dir);
}
