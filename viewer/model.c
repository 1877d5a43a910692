/* model.c: one or more profile files, read through the file layer and merged into one
 * function table (pstats.add), with every file's tasks and threads listed side by
 * side and the header the viewer shows. No curses; single-threaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Agrees across files: the common value, "mixed" when they differ, "?" when none says. */
static const char *merge_word(const char *have, const char *add)
{
	if (!add || !*add)
		return have;
	if (!strcmp(have, "?"))
		return add;
	return strcmp(have, add) ? "mixed" : have;
}

static int stall_longer(const void *x, const void *y)
{
	const struct vw_stall *a = x, *b = y;
	if (a->s->seconds != b->s->seconds)
		return a->s->seconds > b->s->seconds ? -1 : 1;
	return a->file < b->file ? -1 : a->file > b->file;
}

int vw_model_from(struct vw_model *m, struct cp_profile **profiles, const char **paths, uint32_t n)
{
	memset(m, 0, sizeof(*m));
	m->profiles = profiles;
	m->paths = paths;
	m->nprofiles = n;
	m->clock = "?";
	m->mode = "?";
	m->pid = -1;

	const struct cp_stats **st = calloc(n ? n : 1, sizeof(*st));
	if (!st)
		goto nomem;
	uint32_t ntasks = 0, nthreads = 0, nstalls = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_extras *ex = &profiles[i]->ex;
		st[i] = &profiles[i]->stats;
		if (!ex->present)
			continue;
		ntasks += ex->ntasks;
		nthreads += ex->nthreads;
		nstalls += ex->nstalls;
		if (ex->stall_threshold > m->stall_threshold)
			m->stall_threshold = ex->stall_threshold;
		m->clock = merge_word(m->clock, ex->clock);
		m->mode = merge_word(m->mode, ex->mode);
		if (ex->stop > ex->start)
			m->duration += ex->stop - ex->start;
		if (!m->ex) {
			m->ex = ex;
			m->pid = ex->pid;
		}
	}
	int err = vw_table_build(&m->funcs, st, n);
	free(st);
	if (err)
		goto nomem;
	m->tasks = calloc(ntasks ? ntasks : 1, sizeof(*m->tasks));
	m->threads = calloc(nthreads ? nthreads : 1, sizeof(*m->threads));
	m->stalls = calloc(nstalls ? nstalls : 1, sizeof(*m->stalls));
	if (!m->tasks || !m->threads || !m->stalls)
		goto nomem;
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_extras *ex = &profiles[i]->ex;
		if (!ex->present)
			continue;
		for (uint32_t j = 0; j < ex->ntasks; j++)
			m->tasks[m->ntasks++] = (struct vw_task){&ex->tasks[j], i, NULL};
		for (uint32_t j = 0; j < ex->nthreads; j++)
			m->threads[m->nthreads++] = (struct vw_thread){&ex->threads[j], i};
		for (uint32_t j = 0; j < ex->nstalls; j++)
			m->stalls[m->nstalls++] = (struct vw_stall){&ex->stalls[j], i};
	}
	qsort(m->stalls, m->nstalls, sizeof(*m->stalls), stall_longer);
	return 0;
nomem:
	vw_model_free(m);
	return -ENOMEM;
}

int vw_model_load(struct vw_model *m, char *const *paths, int n, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	struct cp_profile **profiles = calloc(n > 0 ? n : 1, sizeof(*profiles));
	const char **names = calloc(n > 0 ? n : 1, sizeof(*names));
	if (!profiles || !names) {
		free(profiles);
		free(names);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		char why[256] = "";
		names[i] = paths[i];
		int rc = cp_profile_read(paths[i], &profiles[i], why, sizeof(why));
		if (rc == 0 && !profiles[i])
			rc = -EINVAL;
		if (rc) {
			if (!*why)
				snprintf(why, sizeof(why), "%s", strerror(rc < 0 ? -rc : rc));
			/* The reader's line usually names the file already. */
			size_t pl = strlen(paths[i]);
			if (!strncmp(why, paths[i], pl) && why[pl] == ':')
				snprintf(err, errlen, "%s", why);
			else
				snprintf(err, errlen, "%s: %s", paths[i], why);
			for (int j = 0; j < i; j++)
				cp_profile_free(profiles[j]);
			free(profiles);
			free(names);
			return rc < 0 ? rc : -EINVAL;
		}
	}
	int rc = vw_model_from(m, profiles, names, (uint32_t)n);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

void vw_model_free(struct vw_model *m)
{
	for (uint32_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i].table) {
			vw_table_free(m->tasks[i].table);
			free(m->tasks[i].table);
		}
	free(m->tasks);
	free(m->threads);
	free(m->stalls);
	vw_table_free(&m->funcs);
	if (m->whole) {
		vw_table_free(m->whole);
		free(m->whole);
	}
	if (m->whole_arena)
		cp_arena_free(m->whole_arena);
	for (uint32_t i = 0; i < m->nprofiles; i++)
		cp_profile_free(m->profiles[i]);
	free(m->profiles);
	free(m->paths);
	memset(m, 0, sizeof(*m));
}

const struct vw_table *vw_model_task_table(struct vw_model *m, uint32_t i)
{
	struct vw_task *t = &m->tasks[i];
	if (t->table)
		return t->table;
	struct vw_table *tab = calloc(1, sizeof(*tab));
	const struct cp_stats *st = &t->t->stats;
	if (!tab || vw_table_build(tab, &st, 1)) {
		free(tab);
		return NULL;
	}
	return t->table = tab;
}

void vw_model_command(const struct vw_model *m, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	if (!m->ex)
		return;
	for (uint32_t i = 0; i < m->ex->argc && at + 1 < len; i++) {
		int k = snprintf(buf + at, len - at, "%s%s", i ? " " : "",
				 m->ex->argv[i] ? m->ex->argv[i] : "");
		if (k < 0)
			break;
		at += (size_t)k;
	}
}
