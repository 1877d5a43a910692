/* bind.c: the shim's interposers bound into a program that was not started with them.
 * A preloaded shim's exported functions win symbol lookup in every object; a shim that
 * `coprof attach` dlopens in a running program wins nothing, because each object's calls
 * to the C library were bound when it was loaded. pl_bind goes through the objects
 * loaded now and points each of their global offset table's entries for a name of the
 * list at the shim's function of that name, as the loader would have had the shim been
 * preloaded: the jump slots of calls through the PLT, and the GLOB_DAT entries of calls
 * compiled without it (-fno-plt) or of the function's address taken. Entries in the
 * read-only part after relocation (RELRO) are written with that page made writable for
 * the write alone. A program's thread calling through an entry as it changes reads the
 * old address or the new (one aligned 8-byte store). The shim itself, the loader and
 * the vDSO are left alone. An object loaded later binds as the loader binds it (to the
 * C library) until pl_bind_new, which the control thread calls while a window is open,
 * finds it. x86-64 ELF only, as attach is. Runs on the shim's set-up thread and on the
 * control thread.
 *
 * An object is bound only once it is wholly loaded. The loader puts a new object on
 * its list (which dl_iterate_phdr walks) before it relocates it and makes its RELRO
 * pages read-only, all under its load lock: a GOT written then would be written over,
 * and a RELRO page made read-only under the loader's relocation would crash it. So the
 * objects listed are noted first, the load lock is taken and let go (a dlopen of the
 * shim itself with RTLD_NOLOAD waits for any load under way), and only the objects
 * noted before are bound; one that came since waits for the next call. While the
 * walk runs, no object on the list is unmapped (dlclose takes it off under the lock the
 * walk holds, and unmaps it after). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "service.h"

#define BIND_OBJECTS 4096 /* objects one call binds at most */

struct bind_job {
	struct pl_bind_name *names;
	size_t n;
	uintptr_t self; /* an address in the shim's text */
	int err;	/* the first -errno of an entry that could not be written */
	/* the objects listed before the load lock was let go: only these are bound */
	uintptr_t *noted;
	size_t nnoted;
};

/* The object's address `p` of a dynamic entry: glibc relocates the dynamic section's
 * pointers of a loaded object in place, other loaders may not. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static int contains(const struct dl_phdr_info *info, uintptr_t at)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && at >= lo && at < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

/* Writes `value` into the entry at `slot`, making its page writable for the write when
 * it lies in the object's RELRO pages. 0 or -errno. */
static int write_slot(const struct dl_phdr_info *info, uintptr_t slot, uintptr_t value)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t lo = 0, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_GNU_RELRO) {
			lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
			hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(page - 1);
		}
	}
	if (*(volatile uintptr_t *)slot == value)
		return 0;
	if (slot < lo || slot >= hi) {
		__atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELEASE);
		return 0;
	}
	void *at = (void *)(slot & ~(uintptr_t)(page - 1));
	if (mprotect(at, (size_t)page, PROT_READ | PROT_WRITE) != 0)
		return -errno;
	__atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELEASE);
	mprotect(at, (size_t)page, PROT_READ);
	return 0;
}

static void bind_relocs(struct dl_phdr_info *info, struct bind_job *job, const ElfW(Rela) * r,
			size_t bytes, const ElfW(Sym) * syms, const char *strs)
{
	for (size_t k = 0; k < bytes / sizeof(*r); k++) {
		unsigned type = ELF64_R_TYPE(r[k].r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		const ElfW(Sym) *s = &syms[ELF64_R_SYM(r[k].r_info)];
		if (s->st_shndx != SHN_UNDEF || ELF64_ST_TYPE(s->st_info) == STT_OBJECT)
			continue;
		const char *name = strs + s->st_name;
		for (size_t i = 0; i < job->n; i++) {
			if (!job->names[i].ours || strcmp(name, job->names[i].name) != 0)
				continue;
			int rc = write_slot(info, info->dlpi_addr + r[k].r_offset,
					    (uintptr_t)job->names[i].ours);
			if (rc == 0)
				job->names[i].bound++;
			else if (!job->err)
				job->err = rc;
			break;
		}
	}
}

static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct bind_job *job = arg;
	if (job->nnoted < BIND_OBJECTS)
		job->noted[job->nnoted++] = info->dlpi_addr;
	return 0;
}

static int noted(const struct bind_job *job, uintptr_t addr)
{
	for (size_t i = 0; i < job->nnoted; i++)
		if (job->noted[i] == addr)
			return 1;
	return 0;
}

static int bind_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct bind_job *job = arg;
	if (contains(info, job->self) || info->dlpi_addr == getauxval(AT_BASE) ||
	    info->dlpi_addr == getauxval(AT_SYSINFO_EHDR) || !noted(job, info->dlpi_addr))
		return 0;
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return 0; /* statically linked: nothing to bind */
	uintptr_t syms = 0, strs = 0, jmprel = 0, rela = 0;
	size_t jmprel_bytes = 0, rela_bytes = 0;
	int pltrel = DT_RELA;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: syms = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: strs = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_JMPREL: jmprel = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: jmprel_bytes = dyn->d_un.d_val; break;
		case DT_PLTREL: pltrel = (int)dyn->d_un.d_val; break;
		case DT_RELA: rela = dyn_ptr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: rela_bytes = dyn->d_un.d_val; break;
		}
	}
	if (!syms || !strs)
		return 0;
	if (jmprel && pltrel == DT_RELA)
		bind_relocs(info, job, (const ElfW(Rela) *)jmprel, jmprel_bytes,
			    (const ElfW(Sym) *)syms, (const char *)strs);
	if (rela)
		bind_relocs(info, job, (const ElfW(Rela) *)rela, rela_bytes,
			    (const ElfW(Sym) *)syms, (const char *)strs);
	return 0;
}

int pl_bind(struct pl_bind_name *names, size_t n)
{
	struct bind_job job = {.names = names, .n = n, .self = (uintptr_t)&pl_bind};
	if (!(job.noted = malloc(BIND_OBJECTS * sizeof(*job.noted))))
		return -ENOMEM;
	dl_iterate_phdr(note_object, &job);
	/* The shim's functions through a handle of its own: a reference from its code would
	 * go through the global scope, where the C library's come first. Getting it takes
	 * the load lock: the objects noted are wholly loaded once it returns. */
	Dl_info self;
	void *shim;
	if (!dladdr((void *)&pl_bind, &self) || !(shim = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD))) {
		free(job.noted);
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		names[i].bound = 0;
		names[i].ours = dlsym(shim, names[i].name);
	}
	dlclose(shim);
	dl_iterate_phdr(bind_object, &job);
	free(job.noted);
	return job.err;
}

/* The loader's count of objects it added, read from the first object's record. */
static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

int pl_bind_new(struct pl_bind_name *names, size_t n, unsigned long long *adds)
{
	unsigned long long now = 0;
	dl_iterate_phdr(read_adds, &now);
	if (now == *adds)
		return 0;
	int rc = pl_bind(names, n);
	*adds = now; /* an object added since is found next time: the count moved on */
	return rc;
}
