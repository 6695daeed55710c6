#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch --preflight in driver mode on the lab: recorded check
# results with a failed node (the spare replaces it, drained with the
# measured reason) and a slow one (placement gets it); the live check on
# the lab's GPU-less nodes (each fails, nothing runs); and preemption
# through the driver (the batch script gets the signal, the agents save,
# the job is requeued with status 75).
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
	# node2 failed its memory test, node4 is slow (GEMM), the others are fine.
	export RESULTS=$BATS_TEST_DIRNAME/../data/check/lab-driver.json
	export JOB_NAME=phx-preflight-tests
}

teardown()
{
	reset_nodes
}

# submit NODES [phalanx-launch options] -- COMMAND: a batch job whose script
# runs the driver and ends with its status; sets JOB and OUT. Slurm signals
# only the batch shell (sbatch --signal=B:..., scancel --batch): the script
# passes USR1 on to the driver. SBATCH_EXTRA: more sbatch options.
submit()
{
	local n=$1 script=$BATS_TEST_TMPDIR/job.sh
	shift
	{
		echo '#!/bin/bash'
		echo 'export GLOO_SOCKET_IFNAME=eth0'
		echo 'got=0'
		echo 'trap '"'"'got=1; kill -USR1 $pid'"'"' USR1'
		printf '%q ' "$LAUNCH" "$@"
		echo '&'
		echo 'pid=$!'
		# wait returns early when the trap ran; the driver's status comes after.
		echo 'wait $pid; rc=$?'
		echo 'while [ $got = 1 ] && [ $rc -gt 128 ]; do got=0; wait $pid; rc=$?; done'
		echo 'echo "driver exit $rc"; exit $rc'
	} >"$script"
	sbatch_driver "$n" "$script"
}

pids_are()
{
	[ "$(grep -c '^\[rank [0-7]\] pid ' "$OUT")" -eq "$1" ]
}

@test "recorded preflight: the failed node is replaced by the spare and drained, the slow one goes to placement" {
	mkdir -p "$BATS_TEST_TMPDIR/ckpt"
	submit 5 --spares 1 --drain-bad-nodes --nproc-per-node 2 --preflight-results "$RESULTS" \
		-- /usr/bin/python3 "$TRAIN" --steps 30 --step-sleep 0.02 \
		--ckpt-dir "$BATS_TEST_TMPDIR/ckpt"
	wait_for 240 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	has "^phalanx: preflight: checking 5 node(s) from $RESULTS"
	has '^phalanx: warning: node node2 is bad (preflight check failed: GPU 0: 3 words of a 1024 MiB memory test read back wrong)'
	has '^phalanx: warning: node node4 is slow in the preflight check (GPU 0: GEMM 402.5 TFLOP/s'
	# One step, on the spare instead of node2; no node was checked twice.
	[ "$(grep -c '^phalanx: starting the step on' "$OUT")" -eq 1 ]
	[ "$(step_nodes 1)" = 'node[1,3-5]' ]
	[ "$(grep -c '^phalanx: preflight: checking' "$OUT")" -eq 1 ]
	# Every agent placed with node4 slow; rank 0's agent says so.
	has '^phalanx: placement: node node4 is slow (--slow-nodes): kept off the critical path'
	[[ $(node_state node2) == drain* ]]
	sinfo -R -h -n node2 -o %E |
		grep -q '^phalanx-launch: preflight check failed: GPU 0: 3 words of a 1024 MiB memory test'
	grep -q '^\[rank 0\] .*finished 30 steps.*replicas identical: True' "$OUT"
	has '^driver exit 0$'
	[[ $(node_state node4) != drain* ]]
}

@test "recorded preflight without a spare: too few good nodes requeue the job without the failed one" {
	submit 4 --nproc-per-node 1 --preflight-results "$RESULTS" -- /bin/true
	wait_for 60 restarts_are 1
	show_job
	has 'node node2 is bad (preflight check failed'
	has 'requeueing job [0-9]*: only 3 healthy node(s) left of 4, 4 needed, and no --elastic'
	# No step before the requeue (the requeued job may have started since).
	[ "$(sed -n '1,/requeued/p' "$OUT" | grep -c '^phalanx: starting the step on')" -eq 0 ]
	[ "$(job_field "$JOB" ExcNodeList)" = node2 ]
}

@test "live preflight on nodes without a usable GPU: each node fails with the reason, nothing runs" {
	submit 3 --preflight --nproc-per-node 1 -- /bin/true
	wait_for 240 job_finished "$JOB"
	show_job
	for n in node1 node2 node3; do
		has "^phalanx: warning: node $n is bad (preflight check failed: no usable GPU: "
	done
	has 'preflight: every node failed the check, so the job is not run (nor requeued)'
	! has '^phalanx: starting the step on'
	has '^driver exit 4$'
	[ "$(job_field "$JOB" ExitCode)" = 4:0 ]
	[ "$(job_field "$JOB" Restarts)" = 0 ]
}

@test "preemption through the driver: the batch script's USR1 reaches the workers, the job is requeued" {
	submit 4 --nproc-per-node 2 --preempt-grace 20 -- /usr/bin/python3 "$PROBE" --mode beat \
		--duration 300 --step-sleep 0.1
	# Each worker ignores USR1 once it printed its pid (the agents forward the signal).
	wait_for 120 pids_are 8
	sleep 1
	# As sbatch --signal=B:USR1@T does: the batch step only, not the agents' step.
	scancel --batch --signal=USR1 "$JOB"
	wait_for 60 restarts_are 1
	show_job
	has "job $JOB is being preempted (signal 10)"
	[ "$(grep -c '^\[rank [0-7]\] saved rank [0-7] step [0-9]*$' "$OUT")" -eq 8 ]
	has 'preempted: the workers of all 4 nodes were asked to save and have stopped; exiting with 75'
	has "requeueing job $JOB: the agents were preempted and their workers stopped"
	has "^phalanx: job $JOB requeued"
	# Slurm's requeue ends the batch script (KillWait), so its last line,
	# the driver's status, may not be written: Slurm's record tells.
	# Requeued, not relaunched within the allocation.
	[ "$(sed -n "1,/job $JOB requeued/p" "$OUT" | grep -c '^phalanx: starting the step on')" -eq 1 ]
}

@test "a spare brought in by a relaunch is checked again before the step" {
	submit 5 --spares 2 --nproc-per-node 1 --preflight-results "$RESULTS" -- /bin/sleep 617
	wait_for 60 procs_in_are 3 '^/bin/sleep 617$' 1
	kill -9 "$(agent_pid 3)"
	wait_for 60 has 'relaunching'
	wait_for 60 procs_in_are 5 '^/bin/sleep 617$' 1
	scancel --name="$JOB_NAME"
	show_job
	[ "$(step_nodes 1)" = 'node[1,3-4]' ]
	has 'node node3 is bad (srun reported its agent killed'
	# The first check covered node5 too; it is checked again before it joins.
	[ "$(grep -c '^phalanx: preflight: checking' "$OUT")" -eq 2 ]
	[ "$(sed -n '/relaunching/,$p' "$OUT" | grep -c "^phalanx: preflight: checking 1 node(s) from $RESULTS")" -eq 1 ]
	[ "$(step_nodes 2)" = 'node[1,4-5]' ]
}
