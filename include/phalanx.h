/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Phalanx public API, used from inside training processes.
 * See phalanx(3) and phalanx(7).
 */
#ifndef PHALANX_H
#define PHALANX_H

#ifdef __cplusplus
extern "C" {
#endif

#define PHX_VERSION_MAJOR 0
#define PHX_VERSION_MINOR 1
#define PHX_VERSION_PATCH 0

/* Error codes returned (negated) by phx_* calls. */
enum phx_status {
	PHX_OK = 0,
	PHX_EINVAL = 1, /* a bad argument */
	PHX_ENOMEM = 2, /* out of memory */
	PHX_EIO = 3, /* an I/O error */
	PHX_ENOENT = 4, /* nothing to restore, no such generation */
	PHX_EAUTH = 5, /* the job token was refused */
	PHX_ESTATE = 6, /* called in the wrong order */
	PHX_ENOAGENT = 7, /* no Phalanx agent is supervising this process */
	PHX_EBUSY = 8, /* the agent has no free staging buffer yet; retry at a later step */
	PHX_ETIMEDOUT = 9, /* not done within the time given */
	PHX_ELAYOUT = 10 /* the checkpoint cannot be restored onto this job's layout */
};

/* The library's version as "MAJOR.MINOR.PATCH". */
const char *phx_version(void);
/* A sentence for a status code (positive or negated); never NULL. */
const char *phx_strerror(int status);

/*
 * Attaches to the phalanx-launch agent that started this process (its
 * heartbeat page). Optional: phx_heartbeat() attaches on first use.
 * 0, or -PHX_ENOAGENT when no agent supervises the process.
 */
int phx_init(void);
/*
 * Reports progress: step is the training step just finished (>= 0). The
 * agent counts a worker as hung when its step stops moving for the
 * launcher's --hang-timeout. No system call: a few stores into shared memory.
 * 0, -PHX_EINVAL, or -PHX_ENOAGENT (not started by phalanx-launch).
 */
int phx_heartbeat(long step);
/*
 * The worker waits on another role of the job (a trainer on its rollouts'
 * samples, a rollout on the trainer's weights): phx_wait_begin() when the
 * wait starts, phx_wait_end() when it ends. The agent counts the time as
 * the role's "waiting" in phalanx goodput, apart from its productive time.
 * Per thread; a second begin restarts the wait, an end without a begin
 * does nothing. No system call. 0, or -PHX_ENOAGENT.
 */
int phx_wait_begin(void);
int phx_wait_end(void);
/*
 * Checkpoints: state is saved into shared memory that the node agent owns
 * (the stall is one memory copy); the agent persists it to the configured
 * tiers in the background and commits a generation once every rank's
 * shard is durable. See phalanx(3). The calls below are thread-safe (one
 * lock); one save is open at a time per process.
 */

/*
 * 1 when the worker should save after training step `step`: every
 * checkpoint.interval steps, and once after the agent asked for a save
 * (preemption). 0 when not, or a negated error (-PHX_ENOAGENT).
 */
int phx_should_save(long step);
/*
 * Opens the save of step `step` of `bytes` bytes: *buf receives a buffer
 * of at least that size in memory the agent owns; write the state there,
 * then call phx_save_commit(). 0 or a negated error (-PHX_EBUSY: the
 * agent still persists older saves into every buffer; skip this save).
 */
int phx_save_begin(long step, size_t bytes, void **buf);
/*
 * What a rank's save holds, so that a restore after phalanx-launch
 * --elastic changed the data-parallel degree takes the right bytes.
 */
enum phx_save_kind {
	/* The same on every dp rank of its (tp, cp, ep, pp): DDP, ZeRO-0. Default. */
	PHX_SAVE_REPLICATED = 0,
	/* This dp rank's part only (FSDP, ZeRO-1/2/3, DCP): not restored onto another dp. */
	PHX_SAVE_SHARDED = 1,
};
/* phx_save_begin() of a save of that kind. */
int phx_save_begin_kind(long step, size_t bytes, enum phx_save_kind kind, void **buf);
/* Hands the open save to the agent. 0 or a negated error. */
int phx_save_commit(void);
/*
 * phx_save_commit() of the buffer's first `bytes` bytes only, for a save
 * whose size is known once it is written (staged before its metadata
 * exists); 0 commits all the bytes begun. -PHX_EINVAL, with the save still
 * open, when bytes is more than phx_save_begin() asked for.
 */
int phx_save_commit_size(size_t bytes);
/*
 * Drops the open save, if any, without committing it (the write failed, or
 * it needs a larger buffer): the next phx_save_begin() may follow at once.
 */
void phx_save_abort(void);
/*
 * Page-locking of the agent's staging buffers by a device runtime, so that
 * a device-to-host copy into them is one DMA at full bandwidth (pageable
 * memory makes the driver stage every copy through a bounce buffer).
 * phalanx.pytorch passes CUDA's cudaHostRegister and cudaHostUnregister
 * once a state holds CUDA tensors. pin is called once for every staging
 * buffer the library maps for saves (those mapped already, and each new
 * one: the buffers are reused across saves, so they are pinned once, not
 * per save); it returns 0 when the buffer is pinned, else the buffer is
 * used as it is. unpin is called before the library unmaps a buffer pin
 * pinned, and for each of them when the pinning is replaced or turned off
 * (pin NULL). Both run with the library's lock held: they must not call
 * phx_* functions. 0, or -PHX_EINVAL (unpin NULL with pin set).
 */
typedef int (*phx_pin_fn)(void *addr, size_t bytes, void *arg);
typedef void (*phx_unpin_fn)(void *addr, void *arg);
int phx_set_pinning(phx_pin_fn pin, phx_unpin_fn unpin, void *arg);
/*
 * Waits until the job's state as of step `step` is durable: a generation
 * of that step or a later one is committed on every node and published in
 * the most durable tier the job writes (a node-local or shared directory;
 * the memory tier when it has none). A save due only in memory becomes
 * durable with the next save due on disk. timeout_ms < 0 waits for ever.
 * 0 durable; -PHX_EIO when this node could not write that save to any of
 * its tiers (the agent's log says why); -PHX_ETIMEDOUT; -PHX_ENOAGENT.
 */
int phx_save_wait(long step, int timeout_ms);
/*
 * The newest committed generation's bytes of this rank: *step, *data and
 * *bytes; the data is read-only and stays valid until the next
 * phx_save_commit(), phx_restore() or phx_finalize(). -PHX_ENOENT when
 * there is nothing to restore; -PHX_ELAYOUT when the newest generation
 * cannot be restored onto this job's layout (the agent's log says why:
 * another tp, cp, ep or pp, or dp-sharded state after dp changed).
 */
int phx_restore(long *step, const void **data, size_t *bytes);

/*
 * Detaches, and tells the agent that progress reports end here, so the
 * time a worker takes to exit after its last step is not a hang. A later
 * phx_heartbeat() attaches again.
 */
void phx_finalize(void);

#ifdef __cplusplus
}
#endif

#endif
