# SPDX-License-Identifier: Apache-2.0
#
# Shared by the cluster tests (bats). They run against a lab cluster that
# tests/cluster/run brings up; SLURM_CONF and PHX_BUILD_DIR come from it.

bats_require_minimum_version 1.5.0

# The lab sits beside this file, whichever suite loads it.
LAB_CMD=$(dirname "${BASH_SOURCE[0]}")/lab

# The network namespace of node I, named as tests/cluster/lab names it.
lab_netns()
{
	if [ "${PHX_LAB_ID:-0}" = 0 ]; then
		echo "phxns$1"
	else
		echo "phx${PHX_LAB_ID}ns$1"
	fi
}

# Fails the file early, with a hint, when there is no lab to talk to.
require_lab()
{
	if [ -z "${SLURM_CONF:-}" ] || [ -z "${PHX_BUILD_DIR:-}" ]; then
		echo "phalanx: cluster tests: SLURM_CONF and PHX_BUILD_DIR are not set;" \
		     "run them through tests/cluster/run" >&2
		return 1
	fi
	if ! slurm_query timeout 10 sinfo -h >/dev/null; then
		echo "phalanx: cluster tests: no slurmctld answers for $SLURM_CONF;" \
		     "run them through tests/cluster/run or 'lab up'" >&2
		return 1
	fi
}

# slurm_at_least X.Y[.Z]: the lab's Slurm is that release or a later one,
# for the tests whose expectation changed with Slurm (each says where).
slurm_at_least()
{
	local have

	have=$(scontrol --version | awk '{ print $2 }')
	[ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n 1)" = "$1" ]
}

# wait_for SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# fails when it never does. A bound on the wait, never a timing assertion.
wait_for()
{
	local limit=$1 n
	shift

	for ((n = 0; n < limit * 10; n++)); do
		"$@" && return 0
		sleep 0.1
	done
	echo "gave up after ${limit}s waiting for: $*" >&2
	return 1
}

# slurm_query CMD...: a read-only Slurm command, asked again when it fails:
# a controller that misses a MessageTimeout now and then (Slurm 24.11 in the
# lab) must not fail a test that asks once.
slurm_query()
{
	local try

	for try in 1 2 3; do
		"$@" 2>/dev/null && return 0
		sleep 1
	done
	return 1
}

# retry_allocation CMD...: CMD (an srun), run again when its allocation timed
# out in one of the stalls of Slurm 24.11's controller in the lab ("Unable to
# allocate resources: Socket timed out"; it answers nothing for a few seconds
# after a node comes back, or after a step failed to start). The controller
# kills a job whose allocation it could not hand to srun, so nothing runs
# twice. Any other failure is CMD's own and is returned at once.
retry_allocation()
{
	local try rc err

	err=$(mktemp "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/srun.XXXXXX") || return 1
	for try in 1 2 3; do
		rc=0
		"$@" 2> >(tee "$err" >&2) || rc=$?
		wait $! || true
		grep -q 'Unable to allocate resources: Socket timed out' "$err" || break
		sleep 1
	done
	rm -f "$err"
	return "$rc"
}

# Every srun of the tests (run srun ..., srun ... | ...) is a user's srun that
# a controller stall must not fail.
srun()
{
	retry_allocation command srun "$@"
}

# lab_srun SECONDS ARGS...: srun ARGS under 'timeout SECONDS'.
lab_srun()
{
	local limit=$1

	shift
	retry_allocation timeout "$limit" srun "$@"
}

job_state()
{
	slurm_query scontrol show job "$1" -o | grep -o 'JobState=[A-Z_]*' | cut -d= -f2
}

job_field()
{
	slurm_query scontrol show job "$1" -o | tr ' ' '\n' | grep "^$2=" | cut -d= -f2-
}

job_running()
{
	[ "$(job_state "$1")" = RUNNING ]
}

job_finished()
{
	case $(job_state "$1") in
	COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | \
	BOOT_FAIL | DEADLINE | PREEMPTED)
		return 0 ;;
	esac
	return 1
}

# Slurm's state of a node, e.g. "idle", "idle*" (not responding), "down*".
node_state()
{
	slurm_query sinfo -h -N -n "$1" -o %T | head -n 1
}

node_not_responding()
{
	case $(node_state "$1") in
	*'*') return 0 ;;
	esac
	return 1
}

node_down()
{
	case $(node_state "$1") in
	down*) return 0 ;;
	esac
	return 1
}

node_idle()
{
	[ "$(node_state "$1")" = idle ]
}

# The lab's plugstack.conf loads the Phalanx plugin (not 'up --no-plugin').
lab_has_plugin()
{
	grep -q '^required .*spank_phalanx' "$(dirname "$SLURM_CONF")/plugstack.conf" 2>/dev/null
}

# phx_program NAME PATH: the Phalanx program under test, the build tree's
# (PHX_BUILD_DIR/PATH) or, with PHX_INSTALLED=1, the installed one on PATH
# (tests/packages/check runs the lab on the installed packages).
phx_program()
{
	if [ "${PHX_INSTALLED:-}" = 1 ]; then
		command -v "$1" || echo "/nonexistent/$1"
	else
		echo "$PHX_BUILD_DIR/$2"
	fi
}

# use_python_module: the phalanx module the training scripts import, with
# its libphalanx: the build tree's, or the installed one python3 finds.
use_python_module()
{
	[ "${PHX_INSTALLED:-}" = 1 ] && return 0
	export PHALANX_LIBRARY=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PYTHONPATH=$BATS_TEST_DIRNAME/../../checkpoint/python
}

# need_launch_lab NODES: what the tests of phalanx-launch with PyTorch
# need: the launcher built (exported as LAUNCH), a lab of at least NODES
# nodes, PyTorch. Says what is missing and fails otherwise.
need_launch_lab()
{
	LAUNCH=$(phx_program phalanx-launch launcher/phalanx-launch)
	[ -x "$LAUNCH" ] || {
		echo "phalanx: cluster tests: $LAUNCH is not built; run make" >&2
		return 1
	}
	[ "$(slurm_query sinfo -h -N -o %N | sort -u | wc -l)" -ge "$1" ] || {
		echo "phalanx: cluster tests: $(basename "$BATS_TEST_FILENAME") needs a lab of $1" \
		     "nodes; run it through tests/cluster/run (it reads '# lab-nodes: $1')" >&2
		return 1
	}
	/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || {
		echo "phalanx: cluster tests: PyTorch is missing; apt-get install python3-torch" >&2
		return 1
	}
	export LAUNCH
}

# ckptd_env NAME PORT ACT: a scratch folder for the tests' phalanx-ckptd
# (CKPTD_DIR, named after NAME), its agents' address on the lab's bridge
# and its metrics (ports PORT and PORT + 1, apart for each lab), its admin
# socket (SOCK), the phalanx command (PHX), and CKPTD_DIR/daemon.yaml:
# heartbeats every 250 ms, a node lost after 2 s, Slurm polled every
# second, recovery.act ACT.
ckptd_env()
{
	CKPTD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	chmod 0755 "$CKPTD_DIR"
	export CKPTD_DIR CKPTD_ADDR=10.77.${PHX_LAB_ID:-0}.1:$(($2 + 10 * ${PHX_LAB_ID:-0}))
	export CKPTD_METRICS=127.0.0.1:$(($2 + 1 + 10 * ${PHX_LAB_ID:-0}))
	PHX=$(phx_program phalanx cli/phalanx)
	export PHX SOCK=$CKPTD_DIR/ckptd.sock
	cat >"$CKPTD_DIR/daemon.yaml" <<-YAML
		recovery:
		  heartbeat_ms: 250
		  lost_after_ms: 2000
		  slurm_poll: 1
		  act: $3
	YAML
}

# start_ckptd [OPTION...]: phalanx-ckptd on the host side of the lab with
# the lab's key: agents on CKPTD_ADDR, admin socket CKPTD_DIR/ckptd.sock,
# metrics on CKPTD_METRICS, state, log and pid in CKPTD_DIR; waits for it.
start_ckptd()
{
	# A killed daemon leaves its socket file; wait for the new one's.
	rm -f "$CKPTD_DIR/ckptd.sock"
	# PHX_CKPTD_BIN: another build of the daemon (tests/quickstart's ckptd-asan).
	"${PHX_CKPTD_BIN:-$(phx_program phalanx-ckptd checkpoint/ckptd/phalanx-ckptd)}" "$@" \
		--listen "$CKPTD_ADDR" \
		--socket "$CKPTD_DIR/ckptd.sock" --state-dir "$CKPTD_DIR/state" \
		--key "$LAB_DIR/etc/phalanx.key" --metrics "$CKPTD_METRICS" \
		>>"$CKPTD_DIR/daemon.log" 2>&1 &
	echo $! >"$CKPTD_DIR/pid"
	wait_for 10 test -S "$CKPTD_DIR/ckptd.sock"
}

# corrupt FILE: the byte in its middle replaced by its complement (always a change).
corrupt()
{
	local f=$1 off b
	off=$(($(stat -c %s "$f") / 2))
	b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
	printf "\\x$(printf %02x $((255 - b)))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
}

# Comma separated list -> one item per line, sorted.
split_sorted()
{
	tr ',' '\n' <<<"$1" | grep . | sort
}

# After 'run': bats prints a test's output only when the test fails.
show_run()
{
	printf 'status: %s\nstdout:\n%s\nstderr:\n%s\n' "$status" "$output" "${stderr:-}"
}
