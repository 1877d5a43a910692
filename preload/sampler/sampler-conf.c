/* sampler-conf.c: what every file of the sampler reads: its settings (set once by
 * pl_sampler_init), its switches, the calling thread's sampler state, and two checks
 * the tick handler and the setup share: whether a descriptor is still our perf event,
 * and which module's text holds an address. */
#define _GNU_SOURCE
#include <link.h>
#include <linux/perf_event.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "sampler.h"

struct pl_sampler_conf pl_sconf;
int pl_sampler_force_timer;
atomic_int pl_sampler_on;
atomic_int pl_sampler_sandboxed;
_Atomic uint64_t pl_sampler_epoch;
__thread struct pl_sthread *pl_sampler_tls PL_TLS;

struct pl_sthread *pl_sampler_self(void)
{
	return pl_sampler_tls;
}

/* async-signal-safe: fstat first, so that no ioctl reaches a number that names a file
 * of the program's now (an anonymous inode at most: eventfd, timerfd, whose ioctls
 * reject perf's). The event id tells ours from any other perf event. */
int pl_event_ours(int fd, const struct pl_event_id *id, int full)
{
	struct stat sb;
	uint64_t ev;
	if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_dev != id->dev || sb.st_ino != id->ino)
		return 0;
	return !full || (ioctl(fd, PERF_EVENT_IOC_ID, &ev) == 0 && ev == id->id);
}

/* dl_iterate_phdr callback: the executable segment holding r->at. */
static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct pl_text_range *r = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && r->at >= lo &&
		    r->at < lo + ph->p_memsz) {
			r->lo = lo;
			r->hi = lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

int pl_text_range(struct pl_text_range *r)
{
	return r->at && dl_iterate_phdr(find_text, r);
}
