/* symbols.c: address -> (file, declaration line, function) for this process, with libdw.
 *
 * The modules come from /proc/self/maps (dwfl_linux_proc_report), refreshed when an
 * address falls outside all of them (a library dlopen'ed later). For each module, on
 * first use, the DWARF subprograms are read once into a table sorted by address, so a
 * lookup is a binary search; results are also cached by address. Any thread, under
 * one mutex; never from a signal handler. Every file libdw opens is close-on-exec. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coprof-private.h"
#include "service.h"

struct pl_symbols *pl_syms;

struct fn_range {
	uint64_t lo, hi; /* absolute addresses, [lo, hi) */
	const char *file;
	unsigned line;
	const char *name;
};

struct fn_table {
	struct fn_range *fns; /* sorted by lo */
	size_t n, cap;
};

/* The functions of one compilation unit, read when an address first falls in it. */
struct cu_table {
	struct cu_table *next;
	Dwarf_Off off; /* the unit's DIE offset */
	struct fn_table t;
};

/* What we know of one module, hung on its dwfl userdata slot. */
struct mod_info {
	const char *path;
	uint64_t start;
	struct cu_table *cus; /* units read so far */
	struct fn_table all;  /* every unit, for modules whose units have no address index */
	int built_all;
};

struct cache_slot {
	uintptr_t pc; /* 0: empty */
	struct coprof_func_info info;
};

/* Interned strings, allocated in chunks that live until pl_symbols_free. */
struct str_chunk {
	struct str_chunk *next;
	size_t used, cap;
	char data[];
};

struct pl_symbols {
	pthread_mutex_t lock;
	Dwfl *dwfl;
	char *debuginfo_path;
	Dwfl_Callbacks cb;
	struct cache_slot *cache; /* open addressing, power of two */
	size_t ncache, capcache;
	struct str_chunk *strs;
	uint64_t last_refresh; /* ns, monotonic */
};

static const char *intern(struct pl_symbols *s, const char *str, size_t len)
{
	struct str_chunk *c = s->strs;
	if (!c || c->cap - c->used < len + 1) {
		size_t cap = len + 1 > 65536 ? len + 1 : 65536;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return "?";
		c->next = s->strs;
		c->used = 0;
		c->cap = cap;
		s->strs = c;
	}
	char *p = c->data + c->used;
	memcpy(p, str, len);
	p[len] = 0;
	c->used += len + 1;
	return p;
}

/* The elf file of a module is opened by libdwfl's own finder; we only make the
 * descriptor close-on-exec so it never leaks into a program the host execs. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	int fd = dwfl_linux_proc_find_elf(mod, userdata, modname, base, file_name, elfp);
	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* Separate debug info, looked up by build id under /usr/lib/debug only: never through
 * debuginfod, which could make a dump wait on the network. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &id, &vaddr);
	if (n < 2)
		return -1;
	char path[512];
	int off = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (int i = 1; i < n && off < (int)sizeof(path) - 8; i++)
		off += snprintf(path + off, sizeof(path) - (size_t)off, "%02x", id[i]);
	snprintf(path + off, sizeof(path) - (size_t)off, ".debug");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		*debuginfo_file_name = strdup(path);
	return fd;
}

int pl_symbols_new(struct pl_symbols **out)
{
	struct pl_symbols *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->cb.find_elf = find_elf;
	s->cb.find_debuginfo = find_debuginfo;
	s->cb.debuginfo_path = &s->debuginfo_path;
	s->capcache = 1024;
	s->cache = calloc(s->capcache, sizeof(*s->cache));
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->cache || !s->dwfl) {
		pl_symbols_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

static int free_mod(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		    void *arg)
{
	struct mod_info *mi = *userdata;
	if (mi) {
		while (mi->cus) {
			struct cu_table *next = mi->cus->next;
			free(mi->cus->t.fns);
			free(mi->cus);
			mi->cus = next;
		}
		free(mi->all.fns);
		free(mi);
		*userdata = NULL;
	}
	return DWARF_CB_OK;
}

void pl_symbols_free(struct pl_symbols *s)
{
	if (!s)
		return;
	if (s->dwfl) {
		dwfl_getmodules(s->dwfl, free_mod, NULL, 0);
		dwfl_end(s->dwfl);
	}
	while (s->strs) {
		struct str_chunk *next = s->strs->next;
		free(s->strs);
		s->strs = next;
	}
	free(s->cache);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void pl_symbols_lock(struct pl_symbols *s)
{
	pthread_mutex_lock(&s->lock);
}

void pl_symbols_unlock(struct pl_symbols *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* Re-reads /proc/self/maps. Modules already known keep their tables. libdwfl reads
 * /proc/PID/auxv first (for the vDSO), which a process that changed its credentials
 * (setuid from root: no longer dumpable) may not open; then the maps are read alone. */
static void refresh(struct pl_symbols *s)
{
	dwfl_report_begin(s->dwfl);
	if (dwfl_linux_proc_report(s->dwfl, getpid()) != 0) {
		FILE *maps = fopen("/proc/self/maps", "re");
		if (maps) {
			dwfl_linux_proc_maps_report(s->dwfl, maps);
			fclose(maps);
		}
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
	s->last_refresh = cp_clock_gettime_ns(CLOCK_MONOTONIC);
}

/* Joins a relative DWARF path with the compilation directory and folds "x/.." away,
 * so keys name the source file the way a user would. */
static const char *full_path(struct pl_symbols *s, const char *comp_dir, const char *file)
{
	char buf[4096];
	if (file[0] == '/' || !comp_dir)
		snprintf(buf, sizeof(buf), "%s", file);
	else
		snprintf(buf, sizeof(buf), "%s/%s", comp_dir, file);
	/* fold segments: keep a stack of segment starts */
	char outb[4096];
	size_t o = 0;
	size_t starts[512];
	int depth = 0;
	const char *p = buf;
	int absolute = buf[0] == '/';
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0)
			break;
		if (n == 1 && p[0] == '.') {
			/* skip */
		} else if (n == 2 && p[0] == '.' && p[1] == '.' && depth > 0) {
			o = starts[--depth];
		} else if (depth < 512 && o + n + 2 < sizeof(outb)) {
			starts[depth++] = o;
			if (o > 0 || absolute)
				outb[o++] = '/';
			memcpy(outb + o, p, n);
			o += n;
		}
		p += n;
	}
	if (o == 0 && absolute)
		outb[o++] = '/';
	return intern(s, outb, o);
}

static void add_fn(struct fn_table *t, uint64_t lo, uint64_t hi, const char *file, unsigned line,
		   const char *name)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct fn_range *n = realloc(t->fns, cap * sizeof(*n));
		if (!n)
			return;
		t->fns = n;
		t->cap = cap;
	}
	t->fns[t->n++] = (struct fn_range){lo, hi, file, line, name};
}

struct file_memo {
	const char *raw;
	const char *full;
};

/* The declaring file. libdw 0.188 refuses file index 0, which DWARF 5 (clang's
 * default) uses for the primary source file: look that one up in the line table. */
static const char *decl_file(Dwarf_Die *die)
{
	const char *f = dwarf_decl_file(die);
	Dwarf_Attribute attr;
	Dwarf_Word idx;
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t nfiles;
	if (f || dwarf_formudata(dwarf_attr_integrate(die, DW_AT_decl_file, &attr), &idx) != 0 ||
	    !dwarf_diecu(die, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0 ||
	    idx >= nfiles)
		return f;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/* Adds the subprograms among the children of `parent` (recursing into namespaces and
 * classes, where C++ puts them). */
static void walk_dies(struct pl_symbols *s, struct mod_info *mi, struct fn_table *t,
		      Dwarf_Die *parent, Dwarf_Addr bias, const char *comp_dir,
		      struct file_memo *memo)
{
	Dwarf_Die die;
	if (dwarf_child(parent, &die) != 0)
		return;
	do {
		int tag = dwarf_tag(&die);
		if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
		    tag == DW_TAG_structure_type) {
			walk_dies(s, mi, t, &die, bias, comp_dir, memo);
			continue;
		}
		if (tag != DW_TAG_subprogram || dwarf_hasattr(&die, DW_AT_declaration))
			continue;
		Dwarf_Attribute attr;
		const char *name = dwarf_formstring(dwarf_attr_integrate(&die, DW_AT_name, &attr));
		if (!name)
			continue;
		const char *raw = decl_file(&die);
		int line = 0;
		dwarf_decl_line(&die, &line);
		const char *file = mi->path; /* assembly has no declaring file */
		if (raw) {
			/* consecutive functions mostly share a file: memoise the last one */
			if (memo->raw != raw) {
				memo->raw = raw;
				memo->full = full_path(s, comp_dir, raw);
			}
			file = memo->full;
		}
		ptrdiff_t off = 0;
		Dwarf_Addr base, lo, hi;
		while ((off = dwarf_ranges(&die, off, &base, &lo, &hi)) > 0)
			if (hi > lo)
				add_fn(t, lo + bias, hi + bias, file, line > 0 ? (unsigned)line : 0,
				       name);
	} while (dwarf_siblingof(&die, &die) == 0);
}

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void read_cu(struct pl_symbols *s, struct mod_info *mi, struct fn_table *t, Dwarf_Die *cu,
		    Dwarf_Addr bias)
{
	Dwarf_Attribute attr;
	const char *comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr));
	struct file_memo memo = {NULL, NULL};
	walk_dies(s, mi, t, cu, bias, comp_dir, &memo);
}

/* The functions of the unit that holds pc, read on first use (a large library with
 * debug info has thousands of units: only those a profile touches are read). Units
 * without an address index are all read once instead. NULL when the module has no
 * DWARF for pc. */
static const struct fn_table *table_for(struct pl_symbols *s, Dwfl_Module *mod, struct mod_info *mi,
					uint64_t pc)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &bias);
	if (cu) {
		Dwarf_Off off = dwarf_dieoffset(cu);
		for (struct cu_table *c = mi->cus; c; c = c->next)
			if (c->off == off)
				return &c->t;
		struct cu_table *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->off = off;
		read_cu(s, mi, &c->t, cu, bias);
		if (c->t.n > 1)
			qsort(c->t.fns, c->t.n, sizeof(*c->t.fns), cmp_fn);
		c->next = mi->cus;
		mi->cus = c;
		return &c->t;
	}
	if (!mi->built_all) {
		mi->built_all = 1;
		cu = NULL;
		while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != NULL)
			read_cu(s, mi, &mi->all, cu, bias);
		if (mi->all.n > 1)
			qsort(mi->all.fns, mi->all.n, sizeof(*mi->all.fns), cmp_fn);
	}
	return &mi->all;
}

static struct mod_info *mod_info_of(struct pl_symbols *s, Dwfl_Module *mod)
{
	void **userdata;
	Dwarf_Addr start;
	const char *name = dwfl_module_info(mod, &userdata, &start, NULL, NULL, NULL, NULL, NULL);
	if (!*userdata) {
		struct mod_info *mi = calloc(1, sizeof(*mi));
		if (!mi)
			return NULL;
		mi->path = intern(s, name ? name : "?", name ? strlen(name) : 1);
		mi->start = start;
		*userdata = mi;
	}
	return *userdata;
}

static const struct fn_range *find_fn(const struct fn_table *t, uint64_t pc)
{
	if (!t)
		return NULL;
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->fns[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo is the first entry above pc; look back over ranges that may contain it */
	for (size_t i = lo; i > 0 && lo - i < 4; i--)
		if (pc < t->fns[i - 1].hi)
			return &t->fns[i - 1];
	return NULL;
}

static int resolve_uncached(struct pl_symbols *s, uintptr_t pc, struct coprof_func_info *out)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	if (!mod && cp_clock_gettime_ns(CLOCK_MONOTONIC) - s->last_refresh > 100000000u) {
		refresh(s);
		mod = dwfl_addrmodule(s->dwfl, pc);
	}
	if (!mod)
		return -ENOENT;
	struct mod_info *mi = mod_info_of(s, mod);
	if (!mi)
		return -ENOMEM;
	const struct fn_range *f = find_fn(table_for(s, mod, mi, pc), pc);
	if (f) {
		*out = (struct coprof_func_info){f->file, f->line, f->name};
		return 0;
	}
	GElf_Off off;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL);
	out->file = mi->path;
	out->line = 0;
	if (name) {
		out->name = intern(s, name, strlen(name));
	} else {
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)(pc - mi->start));
		out->name = intern(s, buf, (size_t)n);
	}
	return 0;
}

static size_t slot_of(uintptr_t pc, size_t cap)
{
	return (size_t)((pc * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static void cache_put(struct pl_symbols *s, uintptr_t pc, const struct coprof_func_info *info)
{
	if ((s->ncache + 1) * 2 > s->capcache) {
		size_t cap = s->capcache * 2;
		struct cache_slot *n = calloc(cap, sizeof(*n));
		if (!n)
			return;
		for (size_t i = 0; i < s->capcache; i++) {
			if (!s->cache[i].pc)
				continue;
			size_t j = slot_of(s->cache[i].pc, cap);
			while (n[j].pc)
				j = (j + 1) & (cap - 1);
			n[j] = s->cache[i];
		}
		free(s->cache);
		s->cache = n;
		s->capcache = cap;
	}
	size_t j = slot_of(pc, s->capcache);
	while (s->cache[j].pc)
		j = (j + 1) & (s->capcache - 1);
	s->cache[j].pc = pc;
	s->cache[j].info = *info;
	s->ncache++;
}

int pl_symbols_lookup(struct pl_symbols *s, uintptr_t pc, struct coprof_func_info *out)
{
	/* Above user space (x86-64's lower half) is no module of ours: such keys are other
	 * resolvers' (the Python sampler tags its keys with the top bit). */
	if (!s || !pc || (uint64_t)pc >> 47)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	for (size_t j = slot_of(pc, s->capcache); s->cache[j].pc; j = (j + 1) & (s->capcache - 1))
		if (s->cache[j].pc == pc) {
			*out = s->cache[j].info;
			pthread_mutex_unlock(&s->lock);
			return 0;
		}
	if (!s->last_refresh)
		refresh(s);
	int rc = resolve_uncached(s, pc, out);
	if (rc == 0)
		cache_put(s, pc, out);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int pl_symbols_resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	return pl_symbols_lookup(arg, key, out);
}
