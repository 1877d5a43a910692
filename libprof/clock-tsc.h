/* clock-tsc.h: what the TSC clocks stand on: the TSC rate, calibrated once per
 * process, and a per-thread perf task-clock page whose lock word changes whenever the
 * thread was scheduled out. Called from cp_clock_init on the thread being set up. */
#ifndef CP_CLOCK_TSC_H
#define CP_CLOCK_TSC_H

#include <stdint.h>

/* Opens a task-clock perf event on the calling thread and maps its first page; the
 * mapping alone holds the event (no file descriptor stays open). Returns 0, or -errno
 * when perf_event_open or mmap is refused (EACCES, ENOENT, ENOSYS, EMFILE...): the
 * caller then falls back to clock_gettime. */
int cp_perf_page_open(void **page);
/* Unmaps the page, which releases the event. */
void cp_perf_page_close(void *page);
/* The lock word of a page from cp_perf_page_open. */
const volatile uint32_t *cp_perf_page_lock(const void *page);

/* Gives ns per TSC tick << CP_CLOCK_SHIFT in *mult. The first call decides, once per
 * process, whether the TSC is sound: an invariant TSC (CPUID: constant and nonstop),
 * and a rate taken from the perf page (cap_user_time) or calibrated against
 * CLOCK_MONOTONIC and verified on a second interval. Later calls return the same
 * answer. Returns 0, or -ENOTSUP when the TSC must not be used. Thread-safe. */
int cp_tsc_rate(const void *page, uint64_t *mult);

#endif
