#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch in agent mode on the lab: PMIx wire-up, the torchrun
# environment, real PyTorch DDP (gloo) workers, restarts after a killed and
# a hung worker, the root cause of a worker that always fails, and no
# process left behind.

load lib

setup_file()
{
	require_lab
	need_launch_lab 2 || return 1
	export PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PROBE=$BATS_TEST_DIRNAME/launch_probe.py
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	# srun reads it as --job-name: the tests' jobs are found by name.
	export JOB_NAME=phx-launch-tests SLURM_JOB_NAME=phx-launch-tests
}

# agents N [phalanx-launch options] -- COMMAND: N nodes, one agent each.
agents()
{
	local n=$1
	shift
	timeout 180 srun --mpi=pmix -N"$n" --ntasks-per-node=1 "$LAUNCH" --agent "$@"
}

# Workers (and what they started) must all be gone once srun returns.
no_leftovers()
{
	! pgrep -f "$1" >/dev/null
}

# The PID of rank $2's worker from a probe's output file $1, once it printed it.
probe_pid()
{
	awk -v r="$2]" '$1 == "[rank" && $2 == r && $3 == "pid" { print $5; exit }' "$1"
}

# Runs the probe in the background, output in $OUT; sets BG.
start_probe()
{
	OUT=$BATS_TEST_TMPDIR/out
	agents 4 "$@" >"$OUT" 2>&1 &
	BG=$!
}

# count_is N PATTERN FILE: FILE has N lines matching PATTERN (for wait_for).
count_is()
{
	[ "$(grep -c "$2" "$3")" -eq "$1" ]
}

# A test that failed half way leaves no job behind for the next one.
teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	if [ -n "${BG:-}" ]; then
		wait "$BG" || true
	fi
	BG=
}

wait_probe()
{
	local rc=0
	wait "$BG" || rc=$?
	BG=
	status=$rc
	output=$(cat "$OUT")
}

@test "a 4-node PyTorch DDP job finishes with identical replicas" {
	mkdir -p "$BATS_TEST_TMPDIR/ckpt"
	run --separate-stderr agents 4 --nproc-per-node 2 -- /usr/bin/python3 "$TRAIN" \
		--steps 20 --ckpt-every 10 --step-sleep 0.01 --ckpt-dir "$BATS_TEST_TMPDIR/ckpt"
	show_run
	[ "$status" -eq 0 ]
	grep -q '^\[rank 0\] .*finished 20 steps.*replicas identical: True' <<<"$output"
	grep -q '^phalanx: all 8 workers finished (0 restart(s))' <<<"$stderr"
	# The agents ended one after another: none took another's end for a death.
	! grep -q '^phalanx: lost ' <<<"$stderr"
	no_leftovers "$TRAIN"
}

@test "--log-time: every line of the agents carries the local time, RFC 3339, to the millisecond" {
	local t0 t1 stamp
	t0=$(date +%s)
	run --separate-stderr agents 2 --nproc-per-node 1 --log-time -- /bin/true
	t1=$(date +%s)
	show_run
	[ "$status" -eq 0 ]
	grep -q '^phalanx: ' <<<"$stderr"
	# Every one of the agents' lines (srun's own are not ours).
	while read -r line; do
		[[ $line =~ ^phalanx:\ ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{2}:[0-9]{2})\  ]]
		stamp=$(date -d "${BASH_REMATCH[1]}" +%s)
		[ "$stamp" -ge "$t0" ]
		[ "$stamp" -le "$t1" ]
	done < <(grep '^phalanx: ' <<<"$stderr")
}

@test "every worker gets the torchrun environment, rank by rank" {
	local lab_hosts env0
	run --separate-stderr agents 4 --nproc-per-node 2 --max-restarts 2 --run-id probe-run \
		--layout 'dp=*' -- /usr/bin/python3 "$PROBE" --mode env
	show_run
	[ "$status" -eq 0 ]
	env0=$(grep '^\[rank [0-9]\] env ' <<<"$output" | sed 's/^\[rank \([0-9]\)\] env /\1 /')
	[ "$(wc -l <<<"$env0")" -eq 8 ]
	# Each rank once, from the line's own prefix.
	[ "$(awk '{ print $1 }' <<<"$env0" | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ]
	lab_hosts=$(dirname "$SLURM_CONF")/hosts
	while read -r prefix rest; do
		declare -A e=()
		for kv in $rest; do e[${kv%%=*}]=${kv#*=}; done
		[ "${e[RANK]}" = "$prefix" ]
		[ "${e[WORLD_SIZE]}" = 8 ] && [ "${e[LOCAL_WORLD_SIZE]}" = 2 ]
		[ "${e[GROUP_WORLD_SIZE]}" = 4 ]
		# Block of two ranks per node: the placement without a fabric.
		[ "${e[LOCAL_RANK]}" = $((prefix % 2)) ]
		[ "${e[GROUP_RANK]}" = $((prefix / 2)) ]
		[ "${e[ROLE_NAME]}" = default ] && [ "${e[ROLE_RANK]}" = "$prefix" ]
		[ "${e[ROLE_WORLD_SIZE]}" = 8 ]
		[ "${e[TORCHELASTIC_RESTART_COUNT]}" = 0 ]
		[ "${e[TORCHELASTIC_MAX_RESTARTS]}" = 2 ]
		[ "${e[TORCHELASTIC_RUN_ID]}" = probe-run ]
		[[ ${e[TORCHELASTIC_ERROR_FILE]} == */error-rank$prefix-restart0.json ]]
		[ "${e[PHALANX_AGENT_SLOT]}" = "${e[LOCAL_RANK]}" ]
		[[ ${e[PHALANX_AGENT_SHM]} =~ ^[0-9]+$ ]]
		[ "${e[PHALANX_DP_RANK]}" = "$prefix" ]
		# The agent's PMIx identity is not the worker's.
		[ "${e[PMIX_RANK]}" = - ]
		# MASTER_ADDR is the address of rank 0's node.
		if [ "$prefix" = 0 ]; then
			grep -q "^${e[MASTER_ADDR]} ${e[HOST]}\$" "$lab_hosts"
		fi
	done <<<"$env0"
	[ "$(grep -o 'MASTER_ADDR=[^ ]*' <<<"$env0" | sort -u | wc -l)" -eq 1 ]
	[ "$(grep -o 'MASTER_PORT=[0-9]*' <<<"$env0" | sort -u | wc -l)" -eq 1 ]
	[ "$(grep -o 'TORCHELASTIC_ERROR_FILE=[^ ]*' <<<"$env0" | sort -u | wc -l)" -eq 8 ]
}

@test "inside a batch job each agent knows its own node" {
	local out=$BATS_TEST_TMPDIR/batch.out job
	run --separate-stderr sbatch --parsable -N4 -o "$out" --wrap \
		"srun --mpi=pmix --ntasks-per-node=1 $LAUNCH --agent --nproc-per-node 1 -- \
		bash -c 'echo \$RANK \$GROUP_RANK \$(hostname)'"
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	wait_for 120 job_finished "$job"
	cat "$out"
	[ "$(job_state "$job")" = COMPLETED ]
	# Four agents on four nodes: one rank each, named by its own node.
	[ "$(grep -c '^\[rank [0-3]\] [0-3] [0-3] node[1-4]$' "$out")" -eq 4 ]
	[ "$(awk '/^\[rank/ { print $5 }' "$out" | sort -u | wc -l)" -eq 4 ]
}

@test "with GPUs every worker sees the node's GPUs in one order, and gets the job token" {
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
	run --separate-stderr timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=1 --gres=gpu:2 \
		"$LAUNCH" --agent -- /usr/bin/python3 "$PROBE" --mode env
	show_run
	[ "$status" -eq 0 ]
	# One worker per GPU by default.
	[ "$(grep -c '^\[rank [0-3]\] env ' <<<"$output")" -eq 4 ]
	# The node's GPUs in one order: device LOCAL_RANK is the worker's own.
	grep -q 'LOCAL_RANK=0 .*CUDA_VISIBLE_DEVICES=0,1 ' <<<"$output"
	grep -q 'LOCAL_RANK=1 .*CUDA_VISIBLE_DEVICES=0,1 ' <<<"$output"
	! grep -q 'PHALANX_JOB_TOKEN=- ' <<<"$output"
}

@test "workers are bound to their GPU's NUMA CPUs and paired NIC, as the plugin binds tasks" {
	local conf=$BATS_TEST_TMPDIR/phalanx.yaml
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$conf"
	printf 'placement:\n  hwloc_xml: "%s"\n' \
		"$(cd "$BATS_TEST_DIRNAME/../data/hwloc" && pwd)/two-socket.xml" >>"$conf"
	run --separate-stderr timeout 120 srun --mpi=pmix -N1 --ntasks-per-node=1 --gres=gpu:2 \
		"$LAUNCH" --agent --config "$conf" -- bash -c 'echo "$LOCAL_RANK $CUDA_VISIBLE_DEVICES \
$NCCL_IB_HCA $UCX_NET_DEVICES $NCCL_SOCKET_IFNAME $OMP_NUM_THREADS \
$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
	show_run
	[ "$status" -eq 0 ]
	[ "$(sort <<<"$output")" = "[rank 0] 0 0,1 =mlx5_0:1 mlx5_0:1 =ib0 1 0
[rank 1] 1 0,1 =mlx5_1:1 mlx5_1:1 =ib1 1 1" ]
}

@test "a worker killed with SIGKILL: all restart together and the job finishes" {
	local pid
	start_probe --nproc-per-node 2 --max-restarts 2 --sync-interval-ms 500 -- \
		/usr/bin/python3 "$PROBE" --steps 40 --step-sleep 0.1
	wait_for 60 grep -q '^\[rank 5\] pid 5 [0-9]* 0$' "$OUT"
	# Mid-run: a few steps in.
	sleep 2
	pid=$(probe_pid "$OUT" 5)
	kill -KILL "$pid"
	wait_probe
	show_run
	[ "$status" -eq 0 ]
	grep -q 'rank 5 on node3 was killed by signal 9 (SIGKILL); restarting all 8 workers (restart 1 of 2)' <<<"$output"
	# Every rank ran twice, the second time with TORCHELASTIC_RESTART_COUNT=1.
	[ "$(grep -c '^\[rank [0-7]\] pid [0-7] [0-9]* 0$' <<<"$output")" -eq 8 ]
	[ "$(grep -c '^\[rank [0-7]\] pid [0-7] [0-9]* 1$' <<<"$output")" -eq 8 ]
	[ "$(grep -c '^\[rank [0-7]\] done rank [0-7] restart 1 steps 40 identical True$' <<<"$output")" -eq 8 ]
	grep -q 'all 8 workers finished (1 restart(s))' <<<"$output"
	no_leftovers "$PROBE"
}

@test "a dead worker wakes the other agents: they stop it all long before their next round's tick" {
	# Rounds only every minute: without the wake-up the other nodes would
	# go on until then, and timeout would end the step first (124).
	run --separate-stderr timeout 50 srun --mpi=pmix -N4 --ntasks-per-node=1 "$LAUNCH" \
		--agent --nproc-per-node 1 --max-restarts 0 --term-timeout 1 \
		--sync-interval-ms 60000 -- bash -c '[ "$RANK" = 3 ] && { sleep 2; exit 3; }; exec sleep 987652'
	show_run
	[ "$status" -eq 1 ]
	grep -q 'rank 3 on node[0-9]* exited with code 3' <<<"$stderr"
	no_leftovers 'sleep 987652'
}

@test "a hung worker (SIGSTOP) is detected, its stacks are printed, and all restart" {
	local pid
	start_probe --nproc-per-node 2 --max-restarts 1 --hang-timeout 3 -- \
		/usr/bin/python3 "$PROBE" --steps 40 --step-sleep 0.1
	wait_for 60 grep -q '^\[rank 2\] beating 2$' "$OUT"
	sleep 2
	pid=$(probe_pid "$OUT" 2)
	kill -STOP "$pid"
	wait_probe
	show_run
	[ "$status" -eq 0 ]
	grep -q "rank 2 on node2 hung: no heartbeat progress for 3 s .*process state T" <<<"$output"
	# Evidence from before the kill: state, wait channel, and the stacks.
	grep -q 'rank 2 hang evidence: status: State:.T (stopped)' <<<"$output"
	grep -q 'rank 2 hang evidence: wchan: ' <<<"$output"
	grep -q 'rank 2 hang evidence: stack: ' <<<"$output"
	if command -v gdb >/dev/null; then
		grep -q 'rank 2 hang evidence: gdb: #0 ' <<<"$output"
	fi
	# The stopped worker is the root cause, not the ones waiting for it.
	grep -q 'attempt 1 failed: rank 2 on node2 hung' <<<"$output"
	[ "$(grep -c '^\[rank [0-7]\] done rank [0-7] restart 1 steps 40 identical True$' <<<"$output")" -eq 8 ]
	no_leftovers "$PROBE"
}

@test "a worker that always fails stops after --max-restarts with its root cause once" {
	local logs=$BATS_TEST_TMPDIR/logs
	run --separate-stderr agents 4 --nproc-per-node 2 --max-restarts 2 --log-dir "$logs" -- \
		/usr/bin/python3 "$PROBE" --mode raise --rank 6
	show_run
	[ "$status" -eq 1 ]
	[ "$(grep -c 'restarting all 8 workers' <<<"$stderr")" -eq 2 ]
	grep -q 'giving up after 2 restart(s) (--max-restarts 2): rank 6 on node4 exited with code 1' <<<"$stderr"
	[ "$(grep -c '==== root cause (first observed failure) ====' <<<"$stderr")" -eq 1 ]
	grep -q '^phalanx: error:   ValueError: injected failure on rank 6 at step 2$' <<<"$stderr"
	grep -q 'launch_probe.py", line [0-9]*, in main' <<<"$stderr"
	# Per-rank logs, with each restart marked.
	grep -q 'ValueError: injected failure on rank 6' "$logs/rank-6.log"
	[ "$(grep -c '^phalanx: restart [12]$' "$logs/rank-6.log")" -eq 2 ]
	[ -s "$logs/error-rank6-restart2.json" ]
	no_leftovers "$PROBE"
}

@test "processes a worker left behind are stopped with it (no orphans)" {
	run --separate-stderr agents 2 --nproc-per-node 2 --max-restarts 0 --term-timeout 1 -- \
		bash -c 'setsid sleep 987654 & sleep 987653 & [ "$RANK" = 3 ] && exit 3; wait'
	show_run
	[ "$status" -eq 1 ]
	grep -q 'rank 3 on node2 exited with code 3' <<<"$stderr"
	no_leftovers 'sleep 98765[34]'
}

@test "USR1 and TERM to an agent reach its workers; the agents exit 143" {
	local agents
	start_probe --nproc-per-node 1 --term-timeout 2 -- bash -c \
		'trap "echo got USR1" USR1; trap "echo got TERM; exit 0" TERM
		echo pid $RANK $$ 0 agent $PHALANX_AGENT_PID; while :; do sleep 0.1; done'
	wait_for 60 count_is 4 '^\[rank [0-3]\] pid [0-3] [0-9]* 0 agent [0-9]*$' "$OUT"
	# The agents themselves, not the step: only the agent can pass it on.
	agents=$(awk '$3 == "pid" { print $NF }' "$OUT")
	[ "$(wc -w <<<"$agents")" -eq 4 ]
	kill -USR1 $agents
	wait_for 30 count_is 4 '^\[rank [0-3]\] got USR1$' "$OUT"
	kill -TERM $agents
	wait_probe
	show_run
	[ "$(grep -c '^\[rank [0-3]\] got TERM$' <<<"$output")" -eq 4 ]
	[ "$(grep -c 'task [0-3]: Exited with exit code 143' <<<"$output")" -eq 4 ]
	[ "$status" -eq 143 ]
	! grep -q '^phalanx: lost ' <<<"$output"
	no_leftovers 'while :; do sleep 0.1'
}

@test "an agent frozen (a hung node): the two agents that watch it report it lost" {
	local agent node watchers
	start_probe --nproc-per-node 1 --peer-timeout-ms 600 -- bash -c \
		'echo pid $RANK $$ 0 agent $PHALANX_AGENT_PID on $SLURMD_NODENAME; while :; do sleep 0.1; done'
	wait_for 60 count_is 4 '^\[rank [0-3]\] pid [0-3] [0-9]* 0 agent [0-9]* on node[0-9]*$' "$OUT"
	# Its beats stop, as a node's that hangs, loses power or its link.
	read -r agent node < <(awk '$2 == "2]" && $3 == "pid" { print $8, $10 }' "$OUT")
	kill -STOP "$agent"
	wait_for 30 count_is 2 "^phalanx: lost $node: no beat from its agent for [0-9]* ms" "$OUT" || {
		kill -CONT "$agent"
		false
	}
	kill -CONT "$agent"
	# Two other nodes watch it (the two agents after it in the ring), and no other node is called lost.
	watchers=$(sed -n "s/^phalanx: lost $node: .*(watched from \\(node[0-9]*\\)).*/\\1/p" "$OUT" | sort -u)
	[ "$(wc -l <<<"$watchers")" -eq 2 ]
	! grep -qx "$node" <<<"$watchers"
	[ "$(grep -c '^phalanx: lost ' "$OUT")" -eq 2 ]
	kill -TERM $(awk '$3 == "pid" { print $8 }' "$OUT")
	wait_probe
	no_leftovers 'while :; do sleep 0.1'
}

@test "usage and PMIx errors have their own exit codes" {
	run --separate-stderr "$LAUNCH" --agent
	[ "$status" -eq 2 ]
	grep -q '^phalanx: error: no command to run' <<<"$stderr"
	run --separate-stderr "$LAUNCH" true
	[ "$status" -eq 2 ]
	# Without --mpi=pmix there is no PMIx server to talk to.
	run --separate-stderr timeout 60 srun -N1 --mpi=none "$LAUNCH" --agent -- true
	show_run
	[ "$status" -eq 3 ]
	grep -q '^phalanx: error: PMIx_Init' <<<"$stderr"
}
