/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/lib/libphalanx_int.h"
#include "checkpoint/proto/heartbeat.h"
#include "phalanx.h"

#define PHX_STR2(x) #x
#define PHX_STR(x) PHX_STR2(x)

const char *phx_version(void)
{
	return PHX_STR(PHX_VERSION_MAJOR) "." PHX_STR(PHX_VERSION_MINOR) "." PHX_STR(
		PHX_VERSION_PATCH);
}

const char *phx_strerror(int status)
{
	static const char *const text[] = {
		[PHX_OK] = "success",
		[PHX_EINVAL] = "invalid argument",
		[PHX_ENOMEM] = "out of memory",
		[PHX_EIO] = "input/output error",
		[PHX_ENOENT] = "no such checkpoint generation",
		[PHX_EAUTH] = "the job token was refused; run the job through Slurm with "
			      "spank_phalanx.so loaded",
		[PHX_ESTATE] = "call made in the wrong order; see phalanx(3)",
		[PHX_ENOAGENT] =
			"no Phalanx agent supervises this process; start it with phalanx-launch",
		[PHX_EBUSY] = "the agent is still persisting earlier saves; save at a later step",
		[PHX_ETIMEDOUT] = "not done within the time given",
		[PHX_ELAYOUT] = "the checkpoint was saved with another layout and cannot be "
				"restored onto this one; the launcher's log says why",
	};
	int code = abs(status);

	if (code < 0 || (size_t)code >= sizeof(text) / sizeof(text[0]))
		return "unknown phalanx status";
	return text[code];
}

/*
 * The agent's heartbeat page, mapped on first use. A plain atomic pointer,
 * not a lock: phx_heartbeat() runs once per training step in a hot loop.
 * hb_page is atomic too: the checkpoint half reads it from a save thread.
 */
static _Atomic(struct phx_hb_slot *) hb_slot;
static _Atomic(void *) hb_page;
static size_t hb_len;

/* The checkpoint half's finalizer, once it registered it. */
static _Atomic(void (*)(void)) fini_hook;

const struct phx_hb_header *phx_lib_hb_header(void)
{
	return atomic_load_explicit(&hb_page, memory_order_acquire);
}

void phx_lib_at_finalize(void (*fini)(void))
{
	atomic_store_explicit(&fini_hook, fini, memory_order_release);
}

static int hb_env_number(const char *name, long max, long *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

int phx_init(void)
{
	struct stat st;
	long fd, slot, nslots;
	void *page;

	if (atomic_load(&hb_slot))
		return PHX_OK;
	if (hb_env_number(PHX_HB_ENV_SHM, 1 << 20, &fd) < 0 ||
	    hb_env_number(PHX_HB_ENV_SLOT, PHX_HB_MAX_SLOTS - 1, &slot) < 0)
		return -PHX_ENOAGENT;
	if (fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < phx_hb_size(0))
		return -PHX_ENOAGENT;
	page = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (page == MAP_FAILED)
		return -PHX_EIO;
	nslots = phx_hb_check(page, (size_t)st.st_size);
	if (nslots < 0 || slot >= nslots) {
		munmap(page, (size_t)st.st_size);
		return -PHX_ENOAGENT;
	}
	/* Two threads' first heartbeats: one mapping wins, the other goes. */
	if (!atomic_compare_exchange_strong(&hb_slot, &(struct phx_hb_slot *){ NULL },
					    phx_hb_slot(page, (unsigned)slot))) {
		munmap(page, (size_t)st.st_size);
		return PHX_OK;
	}
	hb_len = (size_t)st.st_size;
	atomic_store_explicit(&hb_page, page, memory_order_release);
	return PHX_OK;
}

static uint64_t mono_ns(void)
{
	struct timespec now;

	/* vDSO: no system call. */
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

int phx_heartbeat(long step)
{
	struct phx_hb_slot *slot = atomic_load_explicit(&hb_slot, memory_order_acquire);

	if (step < 0)
		return -PHX_EINVAL;
	if (!slot) {
		int rc = phx_init();

		if (rc)
			return rc;
		slot = atomic_load(&hb_slot);
	}
	phx_hb_beat(slot, (uint64_t)step, mono_ns());
	return PHX_OK;
}

static _Thread_local uint64_t wait_since_ns;

static struct phx_hb_slot *attached_slot(void)
{
	struct phx_hb_slot *slot = atomic_load_explicit(&hb_slot, memory_order_acquire);

	if (!slot && phx_init() == PHX_OK)
		slot = atomic_load(&hb_slot);
	return slot;
}

int phx_wait_begin(void)
{
	if (!attached_slot())
		return -PHX_ENOAGENT;
	wait_since_ns = mono_ns();
	return PHX_OK;
}

int phx_wait_end(void)
{
	struct phx_hb_slot *slot = attached_slot();
	uint64_t since = wait_since_ns;

	if (!slot)
		return -PHX_ENOAGENT;
	wait_since_ns = 0;
	if (since)
		atomic_fetch_add_explicit(&slot->wait_ns, mono_ns() - since, memory_order_relaxed);
	return PHX_OK;
}

void phx_finalize(void)
{
	void (*fini)(void) = atomic_load_explicit(&fini_hook, memory_order_acquire);
	struct phx_hb_slot *slot;

	if (fini)
		fini();
	slot = atomic_exchange(&hb_slot, NULL);
	if (!slot)
		return;
	/* No more progress reports: the agent stops timing this worker for hangs. */
	atomic_store_explicit(&slot->beat_ns, 0, memory_order_release);
	munmap(atomic_exchange(&hb_page, NULL), hb_len);
	hb_len = 0;
}
