/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-task device filter: a BPF_PROG_TYPE_CGROUP_DEVICE program that
 * denies a list of character devices, attached to the task's own cgroup
 * on the cgroup-v2 hierarchy (also mounted beside v1 on hybrid hosts: the
 * kernel checks a device open against both).
 *
 * How it meets the site's programs: below an ancestor that attached with
 * BPF_F_ALLOW_MULTI, ours is simply added and both must allow. Slurm's
 * cgroup/v2 attaches with BPF_F_ALLOW_OVERRIDE (job, step) or no flag
 * (task): a program of ours there would replace its rules, so ours ends
 * in a tail call to the one it replaces and only adds denials. The
 * effective set is read back after attaching; a site rule that went
 * missing detaches ours and fails.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "spank/devfilter.h"

/* Device programs on one cgroup's path from the root, more than any site stacks. */
#define MAX_PROGS 64
#define NO_FD (-1)

static int bpf_call(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* ------------------------------------------------------------ where the cgroup is */

/* The cgroup-v2 mount whose root is the hierarchy's root. */
static int cgroup2_mount(char *dir, size_t len)
{
	char line[4096], root[PATH_MAX], point[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int rc = -1;

	if (!f)
		return -1;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - cgroup2 ");

		if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
			continue;
		if (!strcmp(root, "/") && strlen(point) < len) {
			strcpy(dir, point);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

/* pid's path on the v2 hierarchy ("0::PATH" in /proc/PID/cgroup). */
static int task_cgroup(pid_t pid, char *path, size_t len)
{
	char file[64], line[4096];
	FILE *f;
	int rc = -1;

	snprintf(file, sizeof(file), "/proc/%d/cgroup", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return -1;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "0::/", 4) && !strstr(line, "/..") && strlen(line + 3) < len) {
			strcpy(path, line + 3);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

/* The cgroup holds pid and nothing else: Slurm's task cgroup, not a shared one. */
static bool holds_only(int dirfd, pid_t pid)
{
	char text[64], want[32];
	ssize_t n;
	int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	snprintf(want, sizeof(want), "%d\n", (int)pid);
	return !strcmp(text, want);
}

static int move_into(int dirfd, pid_t pid)
{
	char text[32];
	int fd = openat(dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	int n = snprintf(text, sizeof(text), "%d", (int)pid);
	int rc;

	if (fd < 0)
		return -1;
	rc = write(fd, text, (size_t)n) == n ? 0 : -1;
	close(fd);
	return rc;
}

/* ------------------------------------------------------------ the program */

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	return (struct bpf_insn){
		.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm
	};
}

#define LOAD_U32(dst, off) insn(BPF_LDX | BPF_W | BPF_MEM, dst, BPF_REG_1, off, 0)
#define MOV_REG(dst, src) insn(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
#define MOV_IMM(dst, imm) insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define JNE_IMM(dst, imm, off) insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
#define EXIT() insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/*
 * r2 type, r3 major, r4 minor; each denied device is 4 instructions:
 * "if (major == M && minor == m) return 0". What is not denied goes on to
 * tail_map's program, or is allowed.
 */
static size_t build(struct bpf_insn *p, const dev_t *deny, unsigned n, int tail_map)
{
	size_t i = 0;

	p[i++] = MOV_REG(BPF_REG_6, BPF_REG_1);
	p[i++] = LOAD_U32(BPF_REG_2, offsetof(struct bpf_cgroup_dev_ctx, access_type));
	p[i++] = insn(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
	p[i++] = LOAD_U32(BPF_REG_3, offsetof(struct bpf_cgroup_dev_ctx, major));
	p[i++] = LOAD_U32(BPF_REG_4, offsetof(struct bpf_cgroup_dev_ctx, minor));
	p[i++] = JNE_IMM(BPF_REG_2, BPF_DEVCG_DEV_CHAR, (int16_t)(4 * n));
	for (unsigned d = 0; d < n; d++) {
		p[i++] = JNE_IMM(BPF_REG_3, (int32_t)major(deny[d]), 3);
		p[i++] = JNE_IMM(BPF_REG_4, (int32_t)minor(deny[d]), 2);
		p[i++] = MOV_IMM(BPF_REG_0, 0);
		p[i++] = EXIT();
	}
	if (tail_map != NO_FD) {
		p[i++] = MOV_REG(BPF_REG_1, BPF_REG_6);
		p[i++] = insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_2, BPF_PSEUDO_MAP_FD, 0, tail_map);
		p[i++] = insn(0, 0, 0, 0, 0);
		p[i++] = MOV_IMM(BPF_REG_3, 0);
		p[i++] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_tail_call);
	}
	p[i++] = MOV_IMM(BPF_REG_0, 1);
	p[i++] = EXIT();
	return i;
}

/* Loads the program; only a refused one is loaded again, for the verifier's reason. */
static int load(const dev_t *deny, unsigned n, int tail_map, char *why, size_t len)
{
	char log[2048] = "";
	union bpf_attr attr;
	struct bpf_insn *prog;
	int fd, err;

	prog = calloc(4 * (size_t)n + 16, sizeof(*prog));
	if (!prog)
		return phx_errf(why, len, "out of memory");
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uintptr_t)prog;
	attr.insn_cnt = (uint32_t)build(prog, deny, n, tail_map);
	attr.license = (uintptr_t) "Apache-2.0";
	fd = bpf_call(BPF_PROG_LOAD, &attr);
	if (fd < 0) {
		err = errno;
		attr.log_buf = (uintptr_t)log;
		attr.log_size = sizeof(log);
		attr.log_level = 1;
		fd = bpf_call(BPF_PROG_LOAD, &attr);
		if (fd >= 0) { /* refused once, taken now: still not to be trusted */
			close(fd);
			fd = -1;
		}
		phx_errf(why, len, "cannot load a device program (%s)%s%.200s", strerror(err),
			 log[0] ? ": " : "", log);
	}
	free(prog);
	return fd;
}

/* A one-entry program array holding the program with that id, for the tail call. */
static int tail_map_of(uint32_t id, char *why, size_t len)
{
	union bpf_attr attr;
	uint32_t key = 0;
	int prog_fd, map_fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_id = id;
	prog_fd = bpf_call(BPF_PROG_GET_FD_BY_ID, &attr);
	if (prog_fd < 0)
		return phx_errf(why, len, "cannot take the site's device program %u: %s", id,
				strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_PROG_ARRAY;
	attr.key_size = sizeof(uint32_t);
	attr.value_size = sizeof(uint32_t);
	attr.max_entries = 1;
	map_fd = bpf_call(BPF_MAP_CREATE, &attr);
	if (map_fd >= 0) {
		memset(&attr, 0, sizeof(attr));
		attr.map_fd = (uint32_t)map_fd;
		attr.key = (uintptr_t)&key;
		attr.value = (uintptr_t)&prog_fd;
		if (bpf_call(BPF_MAP_UPDATE_ELEM, &attr) < 0) {
			phx_errf(why, len, "cannot chain to the site's device program %u: %s", id,
				 strerror(errno));
			close(map_fd);
			map_fd = -1;
		}
	} else {
		phx_errf(why, len, "cannot make a program array: %s", strerror(errno));
	}
	close(prog_fd);
	return map_fd;
}

/* ------------------------------------------------------------ cgroup programs */

struct progs {
	uint32_t n, flags;
	uint32_t id[MAX_PROGS];
};

static int query(int cgfd, bool effective, struct progs *out)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = (uint32_t)cgfd;
	attr.query.attach_type = BPF_CGROUP_DEVICE;
	attr.query.query_flags = effective ? BPF_F_QUERY_EFFECTIVE : 0;
	attr.query.prog_ids = (uintptr_t)out->id;
	attr.query.prog_cnt = MAX_PROGS;
	if (bpf_call(BPF_PROG_QUERY, &attr) < 0)
		return -1;
	out->n = attr.query.prog_cnt;
	out->flags = attr.query.attach_flags;
	return 0;
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uintptr_t)&info;
	return bpf_call(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0 ? 0 : info.id;
}

static bool has(const struct progs *p, uint32_t id)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (p->id[i] == id)
			return true;
	return false;
}

/* Every program that applied before still applies, itself or through ours. */
static bool kept(int cgfd, const struct progs *before, uint32_t ours, uint32_t chained)
{
	struct progs after;

	if (query(cgfd, true, &after) < 0 || !has(&after, ours))
		return false;
	for (uint32_t i = 0; i < before->n; i++)
		if (before->id[i] != chained && !has(&after, before->id[i]))
			return false;
	return true;
}

static int attach(int cgfd, int prog_fd, uint32_t flags)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cgfd;
	attr.attach_bpf_fd = (uint32_t)prog_fd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	attr.attach_flags = flags;
	return bpf_call(BPF_PROG_ATTACH, &attr);
}

static void detach(int cgfd, int prog_fd)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cgfd;
	attr.attach_bpf_fd = (uint32_t)prog_fd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	bpf_call(BPF_PROG_DETACH, &attr);
}

/*
 * What ours must chain to: the cgroup's own single program (it is
 * replaced), else the single inherited one (an ALLOW_OVERRIDE ancestor's
 * would be dropped). 0: none. Several inherited programs come from
 * ALLOW_MULTI ancestors and stay on their own.
 */
static uint32_t chain_to(const struct progs *own, const struct progs *effective)
{
	if (own->n == 1 && !(own->flags & BPF_F_ALLOW_MULTI))
		return own->id[0];
	if (!own->n && effective->n == 1)
		return effective->id[0];
	return 0;
}

static int filter(int cgfd, const dev_t *deny, unsigned n, int *chain_fd, char *why, size_t len)
{
	struct progs own, effective;
	uint32_t chained, flags = BPF_F_ALLOW_MULTI;
	int map_fd = NO_FD, prog_fd, rc = -1;

	if (query(cgfd, false, &own) < 0 || query(cgfd, true, &effective) < 0)
		return phx_errf(why, len, "cannot read the cgroup's device programs: %s",
				strerror(errno));
	chained = chain_to(&own, &effective);
	if (own.n == 1 && chained)
		flags = own.flags; /* replacing needs the same flags */
	if (chained && (map_fd = tail_map_of(chained, why, len)) < 0)
		return -1;
	prog_fd = load(deny, n, map_fd, why, len);
	if (prog_fd < 0)
		goto out;
	if (attach(cgfd, prog_fd, flags) < 0) {
		phx_errf(why, len, "cannot attach the device program: %s", strerror(errno));
		goto out;
	}
	if (!kept(cgfd, &effective, prog_id(prog_fd), chained)) {
		detach(cgfd, prog_fd);
		phx_errf(why, len, "the site's device rules would not all apply beside Phalanx's");
		goto out;
	}
	*chain_fd = map_fd;
	map_fd = NO_FD;
	rc = 0;
out:
	if (prog_fd >= 0)
		close(prog_fd);
	if (map_fd != NO_FD)
		close(map_fd);
	return rc;
}

/* ------------------------------------------------------------ public */

static int made_dir(int parent, const char *name, const char *path, struct phx_devfilter *made,
		    char *why, size_t len)
{
	int fd;

	if (snprintf(made->cgroup, sizeof(made->cgroup), "%s/%s", path, name) >=
	    (int)sizeof(made->cgroup)) {
		made->cgroup[0] = '\0';
		return phx_errf(why, len, "cgroup path %s is too long", path);
	}
	/* One left by an earlier task of that name holds its programs: never reused. */
	if (mkdirat(parent, name, 0755) < 0 &&
	    (errno != EEXIST || unlinkat(parent, name, AT_REMOVEDIR) < 0 ||
	     mkdirat(parent, name, 0755) < 0)) {
		made->cgroup[0] = '\0';
		return phx_errf(why, len, "cannot make cgroup %s/%s: %s", path, name,
				strerror(errno));
	}
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return phx_errf(why, len, "cannot open cgroup %s/%s: %s", path, name,
				strerror(errno));
	return fd;
}

int phx_devfilter_apply(pid_t pid, const dev_t *deny, unsigned n, const char *name,
			struct phx_devfilter *made, char *why, size_t why_len)
{
	char mount[PATH_MAX], rel[PATH_MAX], path[2 * PATH_MAX];
	int cgfd, target, rc = -1;

	made->cgroup[0] = '\0';
	made->chain_fd = NO_FD;
	if (cgroup2_mount(mount, sizeof(mount)) < 0)
		return phx_errf(why, why_len, "no cgroup-v2 hierarchy is mounted");
	if (task_cgroup(pid, rel, sizeof(rel)) < 0)
		return phx_errf(why, why_len, "cannot read the cgroup-v2 path of process %d",
				(int)pid);
	snprintf(path, sizeof(path), "%s%s", mount, strcmp(rel, "/") ? rel : "");
	cgfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgfd < 0)
		return phx_errf(why, why_len, "cannot open cgroup %s: %s", path, strerror(errno));
	target = cgfd;
	if (!strcmp(rel, "/") || !holds_only(cgfd, pid)) {
		target = made_dir(cgfd, name, path, made, why, why_len);
		if (target < 0)
			goto out;
		if (move_into(target, pid) < 0) {
			phx_errf(why, why_len, "cannot move process %d into %s: %s", (int)pid,
				 made->cgroup, strerror(errno));
			goto out;
		}
	}
	rc = filter(target, deny, n, &made->chain_fd, why, why_len);
out:
	if (target != cgfd && target >= 0)
		close(target);
	close(cgfd);
	return rc;
}

int phx_devfilter_release(struct phx_devfilter *made)
{
	if (made->cgroup[0] && rmdir(made->cgroup) < 0 && errno != ENOENT)
		return -1;
	made->cgroup[0] = '\0';
	if (made->chain_fd != NO_FD)
		close(made->chain_fd);
	made->chain_fd = NO_FD;
	return 0;
}
