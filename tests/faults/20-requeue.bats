#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# The requeue paths of phalanx-launch's driver, each repeated
# PHX_STRESS_ROUNDS times in a row (default 3) on a 7-node lab, so that a
# race showing once in a few runs shows here. Slurm's contract is the
# judge: a node is dead when Slurm calls it DOWN (SlurmdTimeout without an
# answer) or srun loses it; NOT_RESPONDING alone is one unanswered message.
# Every round checks that the job completes and that nothing but the
# killed nodes was ever excluded. The workers are plain sleeps: the
# PyTorch side of recovery is the fault suite's (10-faults.bats).
#
# lab-nodes: 7

load ../cluster/lib
load ../cluster/driver_jobs

ROUNDS=${PHX_STRESS_ROUNDS:-3}

setup_file()
{
	require_lab || return 1
	need_launch_lab 7 || return 1
	export JOB_NAME=phx-requeue
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_CMD=$BATS_TEST_DIRNAME/../cluster/lab
	# act: false: the driver recovers; the daemon shows what it reports.
	ckptd_env phx-requeue 17716 false
	start_ckptd -c "$CKPTD_DIR/daemon.yaml"
	export CONF=$CKPTD_DIR/phalanx.yaml
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$CONF"
	printf 'ckptd:\n  address: "%s"\n' "$CKPTD_ADDR" >>"$CONF"
	sed 's/^ckptd:$/recovery:\n  too_few_nodes: stop\nckptd:/' "$CONF" >"$CKPTD_DIR/stop.yaml"
}

teardown_file()
{
	local pid

	scancel --name="$JOB_NAME" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	[ -z "${CKPTD_DIR:-}" ] || rm -rf "$CKPTD_DIR"
	reset_nodes
}

teardown()
{
	reset_nodes
}

# submit NODES SPARES [CONF] [BEFORE]: a driver job whose workers sleep 8 s;
# BEFORE is shell run in the batch script before the driver starts.
submit()
{
	local dir

	dir=$(mktemp -d "$CKPTD_DIR/job.XXXXXX")
	{
		echo '#!/bin/bash'
		echo "${4:-}"
		printf '%q ' "$LAUNCH" --config "${3:-$CONF}" --spares "$2" --nproc-per-node 1 \
			-- /bin/sleep 8
		echo
		echo 'rc=$?; echo "driver exit $rc"; exit $rc'
	} >"$dir/job.sh"
	BATS_TEST_TMPDIR=$dir sbatch_driver "$1" "$dir/job.sh"
}

# Agents' "starting N workers" lines so far: one per step started.
steps_started()
{
	local n

	n=$(grep -c 'phalanx: starting [0-9]* workers on' "$OUT" 2>/dev/null)
	echo "${n:-0}"
}

started_at_least()
{
	[ "$(steps_started)" -ge "$1" ] && job_running "$JOB"
}

# K random nodes of the job's current run other than its batch host (the
# driver runs there), one per line.
victims()
{
	scontrol show hostnames "$(job_field "$JOB" NodeList)" |
		grep -vx "$(job_field "$JOB" BatchHost)" | shuf -n "$1"
}

kill_nodes()
{
	local n

	for n in "$@"; do
		"$LAB_CMD" kill-node "$n" >/dev/null &
	done
	wait
}

# The job completed, and Slurm never excluded a node outside "$@" (the killed ones).
completed_excluding_only()
{
	local exc n

	wait_for 180 job_finished "$JOB" || return 1
	[ "$(job_state "$JOB")" = COMPLETED ] || return 1
	has '^driver exit 0$' || return 1
	exc=$(job_field "$JOB" ExcNodeList)
	if [ "$exc" != "(null)" ]; then
		for n in $(scontrol show hostnames "$exc"); do
			printf '%s\n' "$@" | grep -qx "$n" || {
				echo "healthy node $n was excluded (ExcNodeList=$exc, killed: $*)"
				return 1
			}
		done
	fi
	for n in $(scontrol show hostnames "$(job_field "$JOB" NodeList)"); do
		printf '%s\n' "$@" | grep -qx "$n" && {
			echo "the job ended on killed node $n"
			return 1
		}
	done
	return 0
}

round_failed()
{
	echo "round $1 failed:"
	show_job
	echo "--- phalanx-ckptd:"
	grep -v "admin connection" "$CKPTD_DIR/daemon.log" | tail -n 20
	echo "--- slurmctld:"
	grep -v '_slurm_rpc_update_job\|setting begin\|updating accounting' \
		"$LAB_DIR/log/slurmctld.log" | tail -n 30
	return 1
}

stopped_slurmd()
{
	ip netns pids "$(lab_netns "$1")" | xargs -r ps -o pid=,comm= -p |
		awk '$2 == "slurmd" { print $1; exit }'
}

# slurm_set_down LINE: the nodes slurmctld's log from LINE on has Slurm
# itself setting DOWN for not responding, if any.
slurm_set_down()
{
	tail -n "+$1" "$LAB_DIR/log/slurmctld.log" |
		sed -n 's/.*error: Nodes \([^ ]*\) not responding, setting DOWN.*/\1/p' | grep .
}

@test "a slurmd that misses Slurm's messages for a moment is neither dropped nor excluded (x$ROUNDS)" {
	local r=0 n pid from repeated=0 down

	while [ "$r" -lt "$ROUNDS" ]; do
		r=$((r + 1))
		n=node$((3 + RANDOM % 3))
		from=$(($(wc -l <"$LAB_DIR/log/slurmctld.log") + 1))
		# The driver starts while Slurm has n NOT_RESPONDING, as a busy
		# node's slurmd that missed one ping within MessageTimeout.
		submit 5 0 "" "for i in \$(seq 200); do sinfo -h -n $n -o %T | grep -q '\\*' && break; sleep 0.1; done"
		wait_for 60 job_running "$JOB" || round_failed "$r"
		pid=$(stopped_slurmd "${n#node}")
		kill -STOP "$pid"
		wait_for 30 node_not_responding "$n" || { kill -CONT "$pid"; round_failed "$r"; }
		sleep 0.5
		kill -CONT "$pid"
		wait_for 180 job_finished "$JOB" || round_failed "$r"
		# Where Slurm itself called a node DOWN (Slurm 24.11's controller in
		# the lab can stall past SlurmdTimeout while it pings a stopped
		# slurmd), excluding it was right and the round tested nothing of
		# the claim: it is run again, at most ROUNDS more times.
		if down=$(slurm_set_down "$from"); then
			repeated=$((repeated + 1))
			echo "# Slurm itself set $(echo $down) DOWN (slurmctld.log) during job $JOB ($n stopped): round run again" >&3
			[ "$repeated" -le "$ROUNDS" ] || round_failed "$r"
			reset_nodes
			r=$((r - 1))
			continue
		fi
		completed_excluding_only || round_failed "$r"
		restarts_are 0 || round_failed "$r"
		! has "node $n is bad" || round_failed "$r"
		echo "# round $r: $n NOT_RESPONDING at the driver's start; job $JOB ran on $(job_field "$JOB" NodeList)" >&3
	done
}

# requeue_rounds NODES SPARES KILL: ROUNDS jobs of NODES nodes holding
# SPARES spares back, KILL of their nodes killed while their step runs.
requeue_rounds()
{
	local r v

	for ((r = 1; r <= ROUNDS; r++)); do
		submit "$1" "$2"
		wait_for 60 started_at_least 1 || round_failed "$r"
		v=$(victims "$3" | tr '\n' ' ')
		# shellcheck disable=SC2086
		kill_nodes $v
		# shellcheck disable=SC2086
		completed_excluding_only $v || round_failed "$r"
		[ "$(job_field "$JOB" Restarts)" -ge 1 ] || round_failed "$r"
		echo "# round $r: killed $v; job $JOB ran again on $(job_field "$JOB" NodeList)" >&3
		reset_nodes
	done
}

@test "two nodes killed with one spare: requeued onto healthy nodes (x$ROUNDS)" {
	requeue_rounds 5 1 2
}

@test "a node killed with no spare: requeued without it (x$ROUNDS)" {
	requeue_rounds 4 0 1
}

@test "a node killed right after a requeue: requeued again without both (x$ROUNDS)" {
	local r v w

	for ((r = 1; r <= ROUNDS; r++)); do
		submit 4 0
		wait_for 60 started_at_least 1 || round_failed "$r"
		v=$(victims 1)
		kill_nodes "$v"
		# The requeued run's first step: kill one of its nodes at once.
		wait_for 90 started_at_least 2 || round_failed "$r"
		w=$(victims 1)
		kill_nodes "$w"
		completed_excluding_only "$v" "$w" || round_failed "$r"
		[ "$(job_field "$JOB" Restarts)" -ge 2 ] || round_failed "$r"
		echo "# round $r: killed $v, then $w after the requeue; job $JOB ran on $(job_field "$JOB" NodeList)" >&3
		reset_nodes
	done
}

# A 6-node job, node7 drained by an administrator, one of the job's nodes
# killed: without it 5 usable nodes are left.
six_nodes_one_drained_one_killed()
{
	scontrol update nodename=node7 state=drain reason="maintenance (test)"
	submit 6 0 "${1:-}"
	wait_for 60 started_at_least 1 || return 1
	KILLED=$(victims 1)
	kill_nodes "$KILLED"
}

# Asked anew each time: wait_for runs it again and again.
job_pending()
{
	[ "$(job_state "$1")" = PENDING ]
}

# status_says PATTERN: phalanx status's line on the job matches "job JOB: PATTERN".
status_says()
{
	"$PHX" status --socket "$SOCK" | grep -q "^job $JOB: $1"
}

@test "a requeue that would leave too few nodes waits for them (recovery.too_few_nodes: wait)" {
	six_nodes_one_drained_one_killed || round_failed 1
	wait_for 60 has 'the job waits until enough are back' || round_failed 1
	wait_for 30 status_says "requeued: .*, 6 needed: .* the job waits until enough are back" ||
		round_failed 1
	"$PHX" status --socket "$SOCK" | grep "^job $JOB:"
	# Pending, with nothing excluded: Slurm keeps it off the DOWN node itself.
	# It stays COMPLETING until Slurm gives up on the dead node's epilog
	# (SlurmdTimeout, longer on a loaded machine).
	wait_for 120 job_pending "$JOB" || round_failed 1
	[ "$(job_field "$JOB" ExcNodeList)" = "(null)" ] || round_failed 1
	sleep 3
	[ "$(job_state "$JOB")" = PENDING ] || round_failed 1
	scontrol update nodename=node7 state=resume
	completed_excluding_only "$KILLED" || round_failed 1
}

@test "a requeue that would leave too few nodes stops the job with the reason (recovery.too_few_nodes: stop)" {
	six_nodes_one_drained_one_killed "$CKPTD_DIR/stop.yaml" || round_failed 1
	wait_for 120 job_finished "$JOB" || round_failed 1
	[ "$(job_state "$JOB")" = FAILED ] || round_failed 1
	has '^driver exit 6$' || round_failed 1
	has "stopping job $JOB: without its bad nodes the partition has 5 usable node(s)" ||
		round_failed 1
	has 'a requeue could never run' || round_failed 1
	wait_for 30 status_says "stopped: without its bad nodes .* could never run" || round_failed 1
	"$PHX" status --socket "$SOCK" | grep "^job $JOB:"
	[ "$(job_field "$JOB" Restarts)" = 0 ] || round_failed 1
}
