#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch on the lab: roles of an MPMD job (their environment and
# rank order, a 'group' role that restarts alone, a 'self' role whose failed
# worker restarts alone), the preemption signal, and straggler reports.

load lib

setup_file()
{
	require_lab
	need_launch_lab 2 || return 1
	export PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PROBE=$BATS_TEST_DIRNAME/launch_probe.py
	export JOB_NAME=phx-roles-tests SLURM_JOB_NAME=phx-roles-tests
}

teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	if [ -n "${BG:-}" ]; then
		wait "$BG" || true
	fi
	BG=
}

# Four agents in the background, output in $OUT; sets BG.
start_agents()
{
	OUT=$BATS_TEST_TMPDIR/out
	timeout 180 srun --mpi=pmix -N4 --ntasks-per-node=1 "$LAUNCH" --agent "$@" >"$OUT" 2>&1 &
	BG=$!
}

wait_agents()
{
	local rc=0
	wait "$BG" || rc=$?
	BG=
	status=$rc
	output=$(cat "$OUT")
}

probe_pid()
{
	awk -v r="$2]" '$1 == "[rank" && $2 == r && $3 == "pid" { print $5; exit }' "$1"
}

count_is()
{
	[ "$(grep -c "$2" "$3")" -eq "$1" ]
}

# Two roles on the lab's four nodes: 2 x 2 trainers (DDP in their own
# group), 2 x 2 rollout workers (beating, no PyTorch).
ROLES=(--sync-interval-ms 300 --nproc-per-node 2)

@test "each role runs its own command; ranks and ROLE_* follow the documented order" {
	local lab_hosts
	lab_hosts=$(dirname "$SLURM_CONF")/hosts
	run --separate-stderr timeout 120 srun --mpi=pmix -N4 --ntasks-per-node=1 "$LAUNCH" \
		--agent --nproc-per-node 2 --place block \
		--role 'trainer:tp=2:nodes=2' \
		--role "rollout:nproc=3:restart=self:cmd=/usr/bin/python3 $PROBE --mode env --role-env" \
		-- /usr/bin/python3 "$PROBE" --mode env --role-env
	show_run
	[ "$status" -eq 0 ]
	# 2 x 2 trainers and 2 x 3 rollout workers.
	[ "$(grep -c '^\[rank [0-9]*\] env ' <<<"$output")" -eq 10 ]
	while read -r prefix rest; do
		declare -A e=()
		for kv in $rest; do e[${kv%%=*}]=${kv#*=}; done
		[ "${e[RANK]}" = "$prefix" ]
		[ "${e[WORLD_SIZE]}" = 10 ] && [ "${e[GROUP_WORLD_SIZE]}" = 4 ]
		if [ "$prefix" -lt 4 ]; then
			# Role 0 first: ranks 0-3 on node1-2, in its own layout (tp=2).
			[ "${e[ROLE_NAME]}" = trainer ] && [ "${e[ROLE_RANK]}" = "$prefix" ]
			[ "${e[ROLE_WORLD_SIZE]}" = 4 ] && [ "${e[LOCAL_WORLD_SIZE]}" = 2 ]
			[ "${e[GROUP_RANK]}" = $((prefix / 2)) ]
			[ "${e[PHALANX_TP_RANK]}" = $((prefix % 2)) ]
			[[ ${e[HOST]} == node[12] ]]
		else
			[ "${e[ROLE_NAME]}" = rollout ] && [ "${e[ROLE_RANK]}" = $((prefix - 4)) ]
			[ "${e[ROLE_WORLD_SIZE]}" = 6 ] && [ "${e[LOCAL_WORLD_SIZE]}" = 3 ]
			[ "${e[GROUP_RANK]}" = $((2 + (prefix - 4) / 3)) ]
			[[ ${e[HOST]} == node[34] ]]
		fi
		# The job's rendezvous is global rank 0's; each role has its own as well.
		if [ "$prefix" = 0 ] || [ "$prefix" = 4 ]; then
			grep -q "^${e[PHALANX_ROLE_MASTER_ADDR]} ${e[HOST]}\$" "$lab_hosts"
		fi
		if [ "$prefix" = 0 ]; then
			grep -q "^${e[MASTER_ADDR]} ${e[HOST]}\$" "$lab_hosts"
		fi
	done < <(grep '^\[rank [0-9]*\] env ' <<<"$output" | sed 's/^\[rank \([0-9]*\)\] env /\1 /')
	[ "$(grep -o ' MASTER_ADDR=[^ ]*' <<<"$output" | sort -u | wc -l)" -eq 1 ]
	[ "$(grep -o 'PHALANX_ROLE_MASTER_ADDR=[^ ]*' <<<"$output" | sort -u | wc -l)" -eq 2 ]
	[ "$(grep -o 'PHALANX_ROLE_MASTER_PORT=[0-9]*' <<<"$output" | sort -u | wc -l)" -eq 2 ]
	grep -q 'role trainer: ranks 0..3 on 2 node(s) from node1, restart group' <<<"$stderr"
	grep -q 'role rollout: ranks 4..9 on 2 node(s) from node3, restart self' <<<"$stderr"
}

@test "role specs are refused with a reason" {
	run --separate-stderr "$LAUNCH" --agent --role 'a:nodes=2:restart=never' -- true
	[ "$status" -eq 2 ]
	grep -q "^phalanx: error: --role a: restart='never': use group" <<<"$stderr"
	run --separate-stderr "$LAUNCH" --agent --role a --role b -- true
	[ "$status" -eq 2 ]
	grep -q 'only one role can take the nodes the others leave' <<<"$stderr"
	run --separate-stderr "$LAUNCH" --agent --role a:nodes=1 --role a -- true
	[ "$status" -eq 2 ]
	grep -q -- '--role a is given twice' <<<"$stderr"
	run --separate-stderr "$LAUNCH" --agent --role a:nodes=1 --role b
	[ "$status" -eq 2 ]
	grep -q 'no command to run for some roles' <<<"$stderr"
	# The step decides whether the nodes add up.
	run --separate-stderr timeout 60 srun --mpi=pmix -N2 --ntasks-per-node=1 "$LAUNCH" \
		--agent --role a:nodes=2 --role b:nodes=1 -- true
	[ "$status" -eq 2 ]
	grep -q 'the roles ask for 3 node(s) and the step has 2' <<<"$stderr"
}

@test "a self role restarts only its failed worker; the other role runs on" {
	local pid
	start_agents "${ROLES[@]}" --max-restarts 2 \
		--role "trainer:nodes=2:cmd=/usr/bin/python3 $PROBE --group role --steps 60 --step-sleep 0.1" \
		--role "rollout:restart=self:cmd=/usr/bin/python3 $PROBE --mode beat --duration 8 --step-sleep 0.1" \
		-- false
	wait_for 60 grep -q '^\[rank 6\] pid 6 [0-9]* 0$' "$OUT"
	sleep 1
	pid=$(probe_pid "$OUT" 6)
	kill -KILL "$pid"
	wait_agents
	show_run
	[ "$status" -eq 0 ]
	grep -q 'rank 6 on node4 was killed by signal 9 (SIGKILL); restarting it alone (restart 1 of 2 of this worker)' <<<"$output"
	# Rank 6 ran twice; nobody else did.
	[ "$(grep -c '^\[rank 6\] pid 6 [0-9]* 1$' <<<"$output")" -eq 1 ]
	[ "$(grep -c '^\[rank [0-9]\] pid [0-9] [0-9]* 1$' <<<"$output")" -eq 1 ]
	! grep -q 'restarting all' <<<"$output"
	# The trainers finished in their own group, untouched.
	[ "$(grep -c '^\[rank [0-3]\] done rank [0-3] restart 0 steps 60 identical True$' <<<"$output")" -eq 4 ]
	[ "$(grep -c '^\[rank [4-7]\] done rank [4-7] steps' <<<"$output")" -eq 4 ]
	grep -q 'all 8 workers finished' <<<"$output"
}

@test "a group role restarts all its workers and only them" {
	local pid
	start_agents "${ROLES[@]}" --max-restarts 1 \
		--role "trainer:nodes=2:cmd=/usr/bin/python3 $PROBE --group role --steps 60 --step-sleep 0.1" \
		--role "rollout:restart=self:cmd=/usr/bin/python3 $PROBE --mode beat --duration 14 --step-sleep 0.1" \
		-- false
	wait_for 60 grep -q '^\[rank 1\] pid 1 [0-9]* 0$' "$OUT"
	sleep 2
	pid=$(probe_pid "$OUT" 1)
	kill -KILL "$pid"
	wait_agents
	show_run
	[ "$status" -eq 0 ]
	grep -q 'attempt 1 failed: rank 1 on node1 was killed by signal 9 (SIGKILL); restarting all 4 workers of role trainer (restart 1 of 1)' <<<"$output"
	# The four trainers ran again, with TORCHELASTIC_RESTART_COUNT=1, and finished.
	[ "$(grep -c '^\[rank [0-3]\] pid [0-3] [0-9]* 1$' <<<"$output")" -eq 4 ]
	[ "$(grep -c '^\[rank [0-3]\] done rank [0-3] restart 1 steps 60 identical True$' <<<"$output")" -eq 4 ]
	# The rollout workers were never stopped.
	[ "$(grep -c '^\[rank [4-7]\] pid [4-7] [0-9]* 0$' <<<"$output")" -eq 4 ]
	[ "$(grep -c '^\[rank [4-7]\] pid [4-7] [0-9]* 1$' <<<"$output")" -eq 0 ]
	[ "$(grep -c '^\[rank [4-7]\] done rank [4-7] steps' <<<"$output")" -eq 4 ]
}

@test "the preemption signal: workers save and stop, the step exits 75 for a requeue" {
	local out=$BATS_TEST_TMPDIR/batch.out job
	run --separate-stderr sbatch --parsable -N4 -o "$out" --wrap \
		"srun --mpi=pmix --ntasks-per-node=1 $LAUNCH --agent --nproc-per-node 2 \
		--preempt-grace 3 --term-timeout 1 -- /usr/bin/python3 $PROBE --mode beat \
		--duration 120 --step-sleep 0.1 --ignore-save 5; echo step exit \$?"
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	wait_for 60 count_is 8 '^\[rank [0-7]\] pid ' "$out"
	sleep 1
	# As sbatch --signal=USR1@T would: to the step's tasks, the agents.
	scancel --signal=USR1 "$job.0"
	wait_for 60 job_finished "$job"
	cat "$out"
	grep -q 'preemption signal.*: asked the 2 workers on node1 to save now' "$out"
	# Seven ranks saved and exited; rank 5 did not and was stopped after the grace.
	[ "$(grep -c '^\[rank [0-7]\] saved rank [0-7] step [0-9]*$' "$out")" -eq 7 ]
	! grep -q '^\[rank 5\] saved' "$out"
	grep -q '1 workers on node3 still run 3 s after the preemption signal; stopping them' "$out"
	grep -q 'preempted: the workers of all 4 nodes were asked to save and have stopped; exiting with 75' "$out"
	grep -q '^step exit 75$' "$out"
	! grep -q 'restarting' "$out"
}

@test "USR1 to one agent reaches every node's workers through the agreement" {
	local agent0
	start_agents --nproc-per-node 1 --preempt-grace 30 --sync-interval-ms 300 -- bash -c \
		'trap "echo got USR1" USR1; echo pid $RANK $$ 0 agent $PHALANX_AGENT_PID
		while :; do sleep 0.1; done'
	wait_for 60 count_is 4 '^\[rank [0-3]\] pid [0-3] [0-9]* 0 agent [0-9]*$' "$OUT"
	agent0=$(awk '$2 == "0]" && $3 == "pid" { print $NF }' "$OUT")
	kill -USR1 "$agent0"
	# Every worker gets the signal, three of them from their agents after the round.
	wait_for 30 count_is 4 '^\[rank [0-3]\] got USR1$' "$OUT"
	grep -q 'preemption signal on another node: asked the 1 workers on node2' "$OUT"
	# These workers do not save: the grace ends it (TERM ends it sooner).
	scancel --name="$JOB_NAME"
	wait_agents
	show_run
}

@test "a rank slower than its peers is reported once as a straggler" {
	local logs=$BATS_TEST_TMPDIR/logs
	run --separate-stderr timeout 120 srun --mpi=pmix -N4 --ntasks-per-node=1 "$LAUNCH" \
		--agent --nproc-per-node 2 --sync-interval-ms 250 --straggler-window 3 \
		--straggler-threshold 150 --log-dir "$logs" -- /usr/bin/python3 "$PROBE" \
		--mode beat --duration 9 --step-sleep 0.05 --rank 5 --slow 5
	show_run
	[ "$status" -eq 0 ]
	# Once, with its node and numbers, and nobody else.
	[ "$(grep -c 'straggler: ' <<<"$stderr")" -eq 1 ]
	grep -Eq '^phalanx: warning: straggler: rank 5 \(role default\) on node3 takes [0-9.]+ ms per step, [0-9.]+x the median [0-9.]+ ms of the 8 ranks of its role' <<<"$stderr"
	# The record for later, one JSON line.
	[ "$(wc -l <"$logs/stragglers.jsonl")" -eq 1 ]
	/usr/bin/python3 - "$logs/stragglers.jsonl" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["rank"] == 5 and r["node"] == "node3" and r["role"] == "default", r
assert r["ratio"] > 2 and r["peers"] == 8 and r["window_s"] == 3, r
assert 150 < r["step_ms"] < 600 and 40 < r["median_ms"] < 120, r
EOF
}
