/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The heartbeat page between phalanx-launch and its workers: a small
 * shared memory file (memfd) the agent creates and its workers inherit,
 * named to them by PHALANX_AGENT_SHM (the descriptor) and PHALANX_AGENT_SLOT
 * (their local rank). One slot per local worker; a worker's phx_heartbeat()
 * stores its step and a CLOCK_MONOTONIC time with plain atomic stores, so a
 * training step costs no system call. Header-only: libphalanx and the
 * launcher share the layout without sharing a library.
 *
 * Version 1 layout, all little-endian host integers:
 *   header (64 bytes): magic "PHXHBEAT", version, nslots, slot_size, epoch,
 *                      save_request
 *   slots[nslots] (64 bytes each, one cache line): step, beat_ns, beats, pid,
 *                      wait_ns
 * wait_ns came later in what was padding, zero to agents and workers that
 * predate it, so the version stays 1.
 */
#ifndef PHX_HEARTBEAT_H
#define PHX_HEARTBEAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PHX_HB_MAGIC 0x5441454248584850ull /* "PHXHBEAT" */
#define PHX_HB_VERSION 1u
#define PHX_HB_MAX_SLOTS 4096u
#define PHX_HB_ENV_SHM "PHALANX_AGENT_SHM"
#define PHX_HB_ENV_SLOT "PHALANX_AGENT_SLOT"

struct phx_hb_header {
	uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t slot_size;
	uint32_t pad0;
	uint64_t epoch; /* restart count of the workers now running */
	/*
	 * Bumped by the agent to ask its workers to save now (the preemption
	 * signal); a worker's phx_should_save() compares it with the last
	 * value it saw.
	 */
	_Atomic uint64_t save_request;
	uint8_t pad[24];
};

struct phx_hb_slot {
	_Atomic uint64_t step; /* last step the worker reported */
	_Atomic uint64_t beat_ns; /* CLOCK_MONOTONIC of that report, 0 = never */
	_Atomic uint64_t beats; /* reports so far */
	_Atomic int32_t pid; /* the worker the agent started in the slot */
	uint32_t pad0;
	/* Time the worker said it waited on another role (phx_wait_begin(3)), summed. */
	_Atomic uint64_t wait_ns;
	uint8_t pad[24];
};

_Static_assert(sizeof(struct phx_hb_header) == 64, "heartbeat header is one cache line");
_Static_assert(sizeof(struct phx_hb_slot) == 64, "heartbeat slot is one cache line");

static inline size_t phx_hb_size(unsigned nslots)
{
	return sizeof(struct phx_hb_header) + (size_t)nslots * sizeof(struct phx_hb_slot);
}

/* Formats a zeroed page of phx_hb_size(nslots) bytes. */
static inline void phx_hb_format(void *page, unsigned nslots)
{
	struct phx_hb_header *h = page;

	memset(page, 0, phx_hb_size(nslots));
	h->version = PHX_HB_VERSION;
	h->nslots = nslots;
	h->slot_size = sizeof(struct phx_hb_slot);
	/* The magic last: a reader that sees it sees the rest. */
	atomic_thread_fence(memory_order_release);
	h->magic = PHX_HB_MAGIC;
}

/* The number of slots of a page of len bytes, or -1 when it is not one. */
static inline long phx_hb_check(const void *page, size_t len)
{
	const struct phx_hb_header *h = page;

	if (len < sizeof(*h) || h->magic != PHX_HB_MAGIC || h->version != PHX_HB_VERSION ||
	    h->slot_size != sizeof(struct phx_hb_slot) || h->nslots > PHX_HB_MAX_SLOTS ||
	    len < phx_hb_size(h->nslots))
		return -1;
	return h->nslots;
}

static inline struct phx_hb_slot *phx_hb_slot(void *page, unsigned i)
{
	return (struct phx_hb_slot *)((char *)page + sizeof(struct phx_hb_header)) + i;
}

/* The agent, before it starts a worker in slot i. */
static inline void phx_hb_reset(void *page, unsigned i, int32_t pid)
{
	struct phx_hb_slot *s = phx_hb_slot(page, i);

	atomic_store_explicit(&s->beat_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->step, 0, memory_order_relaxed);
	atomic_store_explicit(&s->beats, 0, memory_order_relaxed);
	atomic_store_explicit(&s->wait_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->pid, pid, memory_order_release);
}

/* The worker: the step first, the time last, so a reader never pairs a new time with an old step.
 */
static inline void phx_hb_beat(struct phx_hb_slot *s, uint64_t step, uint64_t now_ns)
{
	atomic_store_explicit(&s->step, step, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->beats, 1, memory_order_relaxed);
	atomic_store_explicit(&s->beat_ns, now_ns ? now_ns : 1, memory_order_release);
}

struct phx_hb_snapshot {
	uint64_t step, beat_ns, beats, wait_ns;
	int32_t pid;
};

static inline void phx_hb_read(void *page, unsigned i, struct phx_hb_snapshot *out)
{
	struct phx_hb_slot *s = phx_hb_slot(page, i);

	out->beat_ns = atomic_load_explicit(&s->beat_ns, memory_order_acquire);
	out->step = atomic_load_explicit(&s->step, memory_order_relaxed);
	out->beats = atomic_load_explicit(&s->beats, memory_order_relaxed);
	out->wait_ns = atomic_load_explicit(&s->wait_ns, memory_order_relaxed);
	out->pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
}

#endif
