/* symbols.h: turns code addresses of this process into pstats keys (file, line, name).
 *
 * DWARF via libdw (dwfl) for the executable and every shared library, PIE or not;
 * without debug info the ELF symbol table gives (module path, 0, symbol); an address
 * inside a module but in no symbol gives (module path, 0, "0x<offset>"). Results are
 * cached. Thread-safe (one mutex); used at dump time by the engine's resolver call,
 * by the ucontext adapter to name coroutines and by the sampler for pcs. */
#ifndef PL_SYMBOLS_H
#define PL_SYMBOLS_H

#include <stdint.h>

#include "coprof.h"

#ifndef PL_HIDDEN
#define PL_HIDDEN __attribute__((visibility("hidden")))
#endif

struct pl_symbols;

PL_HIDDEN int pl_symbols_new(struct pl_symbols **out);
PL_HIDDEN void pl_symbols_free(struct pl_symbols *s);
/* Resolves `pc`, a function's entry or any address inside a function. Fills *out with
 * strings that stay valid until pl_symbols_free. Returns -ENOENT when no module of the
 * process maps `pc` (a heap address, say), 0 otherwise. */
PL_HIDDEN int pl_symbols_lookup(struct pl_symbols *s, uintptr_t pc, struct coprof_func_info *out);
/* The same, shaped as a coprof_resolve_fn; `arg` is the struct pl_symbols. */
PL_HIDDEN int pl_symbols_resolve(void *arg, uintptr_t key, struct coprof_func_info *out);
/* Held across fork by the shim, so the child never inherits it locked. */
PL_HIDDEN void pl_symbols_lock(struct pl_symbols *s);
PL_HIDDEN void pl_symbols_unlock(struct pl_symbols *s);

#endif
