#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch in driver mode on the lab: batch jobs whose driver runs
# the agents' step with srun; a node killed mid-run (relaunch on the
# spare, shrink with --elastic, requeue without it) and a worker that
# raises the same exception every time (stopped, not retried).
#
# lab-nodes: 5

load lib
load driver_jobs

setup_file()
{
	require_lab
	need_launch_lab 5 || return 1
	export PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PROBE=$BATS_TEST_DIRNAME/launch_probe.py
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	export JOB_NAME=phx-driver-tests
}

# A killed node comes back for the next test; no job is left behind.
teardown()
{
	reset_nodes
}

# submit NODES [phalanx-launch options] -- COMMAND: a batch job whose
# script is the driver and ends with its status; sets JOB and OUT.
submit()
{
	local n=$1 script=$BATS_TEST_TMPDIR/job.sh
	shift
	driver_script "$@" >"$script"
	sbatch_driver "$n" "$script"
}

train()
{
	mkdir -p "$BATS_TEST_TMPDIR/ckpt"
	echo /usr/bin/python3 "$TRAIN" --steps 150 --ckpt-every 10 --step-sleep 0.05 \
		--ckpt-dir "$BATS_TEST_TMPDIR/ckpt"
}

@test "a node killed mid-run: the driver relaunches on the spare and the job completes" {
	local t0 t1
	# shellcheck disable=SC2046
	submit 5 --spares 1 --nproc-per-node 2 -- $(train)
	wait_for 120 has 'step 20/150'
	[ "$(step_nodes 1)" = 'node[1-4]' ]
	t0=$(date +%s.%N)
	"$LAB_CMD" kill-node node3 >/dev/null
	wait_for 120 has 'resumed from checkpoint'
	t1=$(date +%s.%N)
	echo "# node kill to relaunched workers running: $(echo "$t1 - $t0" | bc) s" >&3
	wait_for 180 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	has 'node node3 is bad'
	# Same world size on the spare; node3 is out.
	[ "$(step_nodes 2)" = 'node[1-2,4-5]' ]
	[ "$(grep -c '^phalanx: starting 8 workers on 4 nodes' "$OUT")" -eq 2 ]
	grep -q '^\[rank [0-9]\] \[rank [0-9]@node5\] resumed from checkpoint' "$OUT"
	[ -z "$(sed -n '/relaunching/,$p' "$OUT" | grep '@node3\]')" ]
	# The spare stands in for node3: it runs node3's ranks (4, 5), and the
	# nodes after node3 keep theirs (node4: 6, 7) instead of moving over.
	has 'placement: node3=node5 (each spare takes the ranks of the node it replaces'
	for r in 4 5; do grep -q "^\[rank $r\] \[rank $r@node5\] resumed from checkpoint" "$OUT"; done
	for r in 6 7; do grep -q "^\[rank $r\] \[rank $r@node4\] resumed from checkpoint" "$OUT"; done
	grep -q '^\[rank 0\] .*finished 150 steps.*replicas identical: True' "$OUT"
	has '^phalanx: the job finished (1 relaunch(es))'
	has '^driver exit 0$'
}

@test "--srun-arg options reach the srun of each step: srun's --export sets the workers' environment" {
	submit 2 --nproc-per-node 2 --srun-arg=--export=ALL,PHX_FROM_SRUN_ARG=seen -- \
		/bin/sh -c 'echo "rank $RANK sees PHX_FROM_SRUN_ARG=${PHX_FROM_SRUN_ARG:-nothing}"'
	wait_for 120 job_finished "$JOB"
	show_job
	[ "$(grep -c '^\[rank [0-3]\] rank [0-3] sees PHX_FROM_SRUN_ARG=seen$' "$OUT")" -eq 4 ]
	has '^driver exit 0$'
}

# no_proc_in I PATTERN: no process of node I has PATTERN in its command line.
no_proc_in()
{
	local p
	for p in $(ip netns pids "$(lab_netns "$1")"); do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$2"; then
			return 1
		fi
	done
}

@test "an agent killed on a healthy node: that node is excluded and drained, the spare takes its place" {
	local pid
	# shellcheck disable=SC2046
	submit 5 --spares 1 --drain-bad-nodes --nproc-per-node 2 -- $(train)
	wait_for 120 has 'step 20/150'
	pid=$(agent_pid 2)
	[ -n "$pid" ]
	kill -9 "$pid"
	wait_for 180 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	# srun's report, not Slurm's node state: node2 itself stays up.
	has 'srun: error: node2: task 1: Killed'
	has 'node node2 is bad (srun reported its agent killed or the node failed)'
	[ "$(step_nodes 2)" = 'node[1,3-5]' ]
	# Its workers died with it; Slurm never took node2 for down, the driver drained it.
	wait_for 30 no_proc_in 2 "$TRAIN"
	[[ $(node_state node2) == drain* ]]
	has '^phalanx: drained node node2 (srun reported its agent killed'
	sinfo -R -h -n node2 -o %E | grep -q '^phalanx-launch: srun reported its agent killed'
	grep -q '^\[rank 0\] .*finished 150 steps.*replicas identical: True' "$OUT"
	has '^driver exit 0$'
}

@test "the workers of a killed agent die with it, also when the step's kill misses them" {
	# Workers that wait in no collective; a sleep of its own to find them by.
	submit 5 --spares 1 --nproc-per-node 2 --max-relaunches 0 -- /bin/sleep 613
	wait_for 60 procs_in_are 2 '^/bin/sleep 613$' 2
	kill -9 "$(agent_pid 2)"
	wait_for 60 job_finished "$JOB"
	show_job
	has 'node node2 is bad (srun reported its agent killed'
	has 'stopping: 0 relaunch(es) made, --max-relaunches 0'
	wait_for 30 no_proc_in 2 'sleep 613'
}

@test "the same exception every time: stopped after K attempts with the reason" {
	# Rank 3 exits 1.5 s after its peers lost it: their "Connection closed
	# by peer" must not be taken for the cause.
	submit 4 --nproc-per-node 2 --max-restarts 0 --same-failure-limit 2 -- \
		/usr/bin/python3 "$PROBE" --mode raise --rank 3 --linger 1.5
	wait_for 300 job_finished "$JOB"
	show_job
	# Two attempts, then the reason, and no third one.
	[ "$(grep -c '^phalanx: starting the step on' "$OUT")" -eq 2 ]
	[ "$(grep -c '^phalanx: result 1 workers-failed rank=3 ' "$OUT")" -eq 2 ]
	has 'stopping: the same failure 2 time(s) in a row (rank 3 on node2: ValueError: injected failure on rank 3 at step 2 @ step 1): a deterministic error, not retried'
	has '^driver exit 5$'
	[ "$(job_field "$JOB" ExitCode)" = 5:0 ]
	[ "$(job_state "$JOB")" = FAILED ]
	[ "$(job_field "$JOB" Restarts)" = 0 ]
}

excludes()
{
	[ "$(job_field "$JOB" ExcNodeList)" = "$1" ]
}

@test "too few nodes left without --elastic: the job is requeued without the bad node" {
	# shellcheck disable=SC2046
	submit 4 --nproc-per-node 2 -- $(train)
	wait_for 120 has 'step 20/150'
	"$LAB_CMD" kill-node node2 >/dev/null
	wait_for 60 restarts_are 1
	wait_for 30 has 'requeueing job [0-9]*: only 3 healthy node(s) left of 4'
	show_job
	has 'node node2 is bad'
	has 'requeueing job [0-9]*: only 3 healthy node(s) left of 4, 4 needed, and no --elastic'
	# Slurm's requeue ends the batch script (KillWait), so its last line may
	# not be written: the exclusion and the single step before it tell.
	[ "$(sed -n '1,/requeueing job/p' "$OUT" | grep -c '^phalanx: starting the step on')" -eq 1 ]
	wait_for 30 excludes node2
}

@test "Slurm refuses the requeue (--no-requeue): exit status 75, which RequeueExit honours before Slurm 23.11.5" {
	# shellcheck disable=SC2046
	SBATCH_EXTRA=--no-requeue submit 4 --nproc-per-node 2 -- $(train)
	wait_for 120 has 'step 20/150'
	# The step's last node: the first runs the batch script, the driver.
	"$LAB_CMD" kill-node "$(scontrol show hostnames "$(step_nodes 1)" | tail -n 1)" >/dev/null
	wait_for 60 has '^driver exit'
	has 'Slurm refused to requeue job [0-9]*: .*; exiting with 75'
	has '^driver exit 75$'
	if slurm_at_least 23.11.5; then
		# Slurm 23.11.5 (its bug 19081): --no-requeue wins over RequeueExit;
		# the job ends with the driver's status and is not requeued.
		wait_for 60 job_finished "$JOB"
		show_job
		[ "$(job_field "$JOB" Restarts)" = 0 ]
		[ "$(job_state "$JOB")" = FAILED ]
	else
		wait_for 60 restarts_are 1
		show_job
		[ "$(job_state "$JOB")" = PENDING ]
	fi
	[ "$(job_field "$JOB" ExitCode)" = 75:0 ]
}

@test "too few nodes left with --elastic: the job goes on with a smaller dp" {
	# shellcheck disable=SC2046
	submit 4 --elastic --nproc-per-node 2 -- $(train)
	wait_for 120 has 'step 20/150'
	"$LAB_CMD" kill-node node4 >/dev/null
	wait_for 180 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	has 'node node4 is bad'
	[ "$(step_nodes 2)" = 'node[1-3]' ]
	has 'starting the step on 3 node(s) node\[1-3\] .*layout tp=1,cp=1,ep=1,dp=6,pp=1'
	has '^phalanx: starting 6 workers on 3 nodes'
	grep -q '^\[rank 0\] .*finished 150 steps.*replicas identical: True' "$OUT"
	has '^driver exit 0$'
}
