#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx check on the lab. Recorded results (tests/data/check) where
# node2's GPUs are 30% slow and node4's all-reduce hangs are judged and
# drained in the lab's Slurm; the live path runs phalanx-check on every
# node in one step, where the lab's fake GPUs must give a clear failure
# per node and never numbers. Each test leaves every node resumed.

load lib

setup_file()
{
	require_lab
	PHALANX=$PHX_BUILD_DIR/cli/phalanx
	CHECK_PROG=$PHX_BUILD_DIR/health/check/phalanx-check
	RECORDED=$BATS_TEST_DIRNAME/../data/check/lab-slow-hung.json
	CONF=$(dirname "$(dirname "$SLURM_CONF")")/etc/phalanx.yaml
	export PHALANX CHECK_PROG RECORDED CONF
	export JOB_NAME=phx-check-tests SLURM_JOB_NAME=phx-check-tests
}

resume_all()
{
	local n

	for n in $(sinfo -h -N -o %N | sort -u); do
		case $(node_state "$n") in
		drain* | drng*) scontrol update nodename="$n" state=resume ;;
		esac
	done
}

teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	resume_all
}

teardown_file()
{
	require_lab 2>/dev/null || return 0
	resume_all
}

node_drained()
{
	case $(node_state "$1") in
	drain* | drng*) return 0 ;;
	esac
	return 1
}

drain_reason()
{
	sinfo -h -N -n "$1" -o %E | head -n 1
}

# row NODE: the line of NODE in the last run's table.
row()
{
	awk -v n="$1" '$1 == n' <<<"$output"
}

@test "recorded results: the 30% slow node and the hung node are named, nothing drained" {
	run "$PHALANX" check --config "$CONF" --results "$RECORDED"
	show_run
	[ "$status" -eq 1 ]
	[[ $(row node1) == "node1 "*" ok "* ]]
	[[ $(row node2) == "node2 "*" slow "*"GEMM"*"below 80% of the median"* ]]
	[[ $(row node3) == "node3 "*" ok "*"timeout"*"fine"* ]]
	[[ $(row node4) == "node4 "*" failed "*"NCCL all-reduce failed with node3 timeout"*"node2 timeout"* ]]
	grep -q '^2 of 4 nodes below threshold: node2 (slow), node4 (failed)$' <<<"$output"
	for n in node1 node2 node3 node4; do
		! node_drained "$n"
	done
}

@test "recorded results with --drain drain the two nodes in Slurm with the measured reason" {
	wait_for 30 node_idle node1
	run "$PHALANX" check --config "$CONF" --results "$RECORDED" --drain
	show_run
	[ "$status" -eq 1 ]
	wait_for 10 node_drained node2
	wait_for 10 node_drained node4
	! node_drained node1
	! node_drained node3
	[[ $(drain_reason node2) == "phalanx: check: GPU "*": GEMM "*" TFLOP/s, below 80% of the median"* ]]
	[[ $(drain_reason node4) == "phalanx: check: NCCL all-reduce failed with node3 timeout"* ]]
	sinfo -R -h -o '%E|%N' | grep -q '^phalanx: check: NCCL all-reduce failed.*|node4$'
	# Resumed, the nodes take jobs again.
	scontrol update nodename=node2,node4 state=resume
	wait_for 30 node_idle node2
	wait_for 30 node_idle node4
}

@test "--nodes reports nodes of the recorded step, judged with the whole step; --json replays" {
	run "$PHALANX" check --config "$CONF" --results "$RECORDED" --nodes 'node[1-2]'
	show_run
	[ "$status" -eq 1 ]
	[ -z "$(row node4)" ]
	[[ $(row node2) == "node2 "*" slow "* ]]
	run "$PHALANX" check --config "$CONF" --results "$RECORDED" --nodes 'node[1-3]' --drain
	show_run
	[ "$status" -eq 1 ]
	wait_for 10 node_drained node2
	! node_drained node4
	"$PHALANX" check --config "$CONF" --results "$RECORDED" --json >"$BATS_TEST_TMPDIR/r.json" || [ $? -eq 1 ]
	grep -q '"state": "failed"' "$BATS_TEST_TMPDIR/r.json"
	run "$PHALANX" check --config "$CONF" --results "$BATS_TEST_TMPDIR/r.json"
	[ "$status" -eq 1 ]
	grep -q '^2 of 4 nodes below threshold: node2 (slow), node4 (failed)$' <<<"$output"
	run "$PHALANX" check --config "$CONF" --results "$RECORDED" --nodes node9
	[ "$status" -eq 3 ]
	[[ $output == *"has no results for node node9"* ]]
}

@test "a bad link between two nodes that are fine with other partners is named, not drained" {
	run "$PHALANX" check --config "$CONF" --results "$BATS_TEST_DIRNAME/../data/check/bad-link.json" --drain
	show_run
	[ "$status" -eq 1 ]
	grep -q '^0 of 8 nodes below threshold$' <<<"$output"
	grep -q '^bad links (both ends fine with other partners): n5-n6$' <<<"$output"
	[[ $output == *"drained 0 nodes"* ]]
}

@test "a broken results file is refused with the path of the bad value" {
	sed 's/"memtest_errors": 0/"memtest_errors": "zero"/' "$RECORDED" >"$BATS_TEST_TMPDIR/bad.json"
	run "$PHALANX" check --config "$CONF" --results "$BATS_TEST_TMPDIR/bad.json" --drain
	show_run
	[ "$status" -eq 3 ]
	[[ $output == *"bad.json: nodes[0](node1).gpus[0].memtest_errors: expected a int, found a string"* ]]
	for n in node1 node2 node3 node4; do
		! node_drained "$n"
	done
}

@test "live: without a usable GPU every node fails with its reason, and no numbers" {
	wait_for 30 node_idle node4
	if [ ! -x "$CHECK_PROG" ]; then
		# A build without CUDA has no node side, and says so.
		run timeout 120 salloc -N4 -J "$JOB_NAME" "$PHALANX" check --config "$CONF"
		show_run
		[ "$status" -eq 3 ]
		[[ $output == *"phalanx-check is built only when configure finds CUDA and NCCL"* ]]
		return 0
	fi
	# The rows are checked by name: the nodes are named, whatever earlier tests left busy.
	run timeout 180 salloc -N4 -w "node[1-4]" -J "$JOB_NAME" "$PHALANX" check --config "$CONF" --json
	show_run
	[ "$status" -eq 1 ]
	[ "$(grep -c '"state": "failed"' <<<"$output")" -eq 4 ]
	[ "$(grep -c '"error": "no usable GPU: ' <<<"$output")" -eq 4 ]
	! grep -q gemm_tflops <<<"$output"
	! grep -q busbw_gbps <<<"$output"
	run --separate-stderr timeout 180 salloc -N4 -w "node[1-4]" -J "$JOB_NAME" "$PHALANX" check \
		--config "$CONF"
	show_run
	[ "$status" -eq 1 ]
	# Progress: one line per phase for the whole step, from its first node, not one per node.
	grep -q '^phalanx: check: 4 nodes in one step, at most [0-9]* s' <<<"$stderr"
	[ "$(grep -c 'phalanx: check: GPUs of 4 nodes checked after [0-9.]* s: 0 usable, 4 not' \
		<<<"$stderr")" -eq 1 ]
	for r in 1 2; do
		[ "$(grep -c "phalanx: check: NCCL round $r of 2 done after [0-9.]* s: 0 nodes paired" \
			<<<"$stderr")" -eq 1 ]
	done
	for n in node1 node2 node3 node4; do
		[[ $(row "$n") == "$n "*" failed "*"no usable GPU: "* ]]
		# No GPU measured: dashes, never a made-up 0.
		[[ $(row "$n") == "$n "*" failed "*" 0 "*" - "*" - "*" - "*" - "* ]]
		! node_drained "$n"
	done
}

@test "live --drain drains the checked nodes with the GPU reason" {
	if [ ! -x "$CHECK_PROG" ]; then
		run timeout 60 "$PHALANX" check --config "$CONF" --nodes node1 --drain
		[ "$status" -eq 3 ]
		! node_drained node1
		return 0
	fi
	wait_for 30 node_idle node3
	run timeout 180 salloc -w node3,node4 -J "$JOB_NAME" "$PHALANX" check --config "$CONF" --drain
	show_run
	[ "$status" -eq 1 ]
	wait_for 10 node_drained node3
	wait_for 10 node_drained node4
	! node_drained node1
	[[ $(drain_reason node3) == "phalanx: check: no usable GPU: "* ]]
}

@test "outside an allocation, without --nodes, it says what to do" {
	run env -u SLURM_JOB_NODELIST "$PHALANX" check --config "$CONF"
	[ "$status" -eq 3 ]
	[[ $output == *"run it inside an allocation (salloc, sbatch) or give --nodes HOSTLIST"* ]]
}
