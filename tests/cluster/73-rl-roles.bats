#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch in a batch script with roles in steps of their own: an RL
# job whose trainer (PyTorch DDP over gloo on 2 nodes) sends its weights
# every iteration to a rollout pool (1-2 nodes, one step per node) over a
# process group formed through the cross-role rendezvous, and gets samples
# back. A rollout node killed: the trainer never restarts, the pool is
# refilled from the shared spare. A trainer node killed: the trainer alone
# relaunches on its own spare from its checkpoint; the rollouts keep their
# processes and reconnect. A rollout node whose worker is stopped: found by
# its heartbeats, handled as a loss. A rollout worker killed on a healthy
# node: that node's step alone is relaunched.
#
# A lab of its own: its six nodes change where the other files' jobs run.
# lab-nodes: 6
# lab-alone: 1

load lib
load driver_jobs

setup_file()
{
	require_lab
	need_launch_lab 6 || return 1
	use_python_module
	export PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export RL=$BATS_TEST_DIRNAME/rl_job.py
	export JOB_NAME=phx-rl-tests
	# Inside node I the lab's nodetmp is node I's own directory.
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
}

teardown()
{
	# A failed test shows what the driver and the roles said (not every iteration).
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${OUT:-}" ]; then
		grep -v 'rl trainer iter\|gen from_iter' "$OUT" | tail -n 150 | sed 's/^/# /' >&3
	fi
	reset_nodes
	rm -rf "$LAB_DIR"/nodes/node*/tmp/"$RUN"
}

# first_seen RE TIMEOUT: waits for RE in the job's output, prints when it was seen.
first_seen()
{
	wait_for "$2" has "$1" && date +%s.%N
}

trainer_iter()
{
	grep -o 'rl trainer iter [0-9]*' "$OUT" | tail -n 1 | awk '{ print $4 }'
}

# rollout_pids I: the PIDs of the rollout worker on node I and of its
# children (under PyTorch 1.x its sync loop runs in one), not its agent's,
# whose command line names it too; the worker's first.
rollout_pids()
{
	local p
	for p in $(ip netns pids "$(lab_netns "$1")" | sort -n); do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^/usr/bin/python3 $RL rollout"; then
			echo "$p"
		fi
	done
}

# rollout_pid I: the PID of the rollout worker on node I, the one its agent started.
rollout_pid()
{
	local p parent
	for p in $(rollout_pids "$1"); do
		parent=$(awk '$1 == "PPid:" { print $2 }' "/proc/$p/status" 2>/dev/null)
		if tr '\0' ' ' <"/proc/$parent/cmdline" 2>/dev/null | grep -q "phalanx-launch --agent"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# synced_after N COUNT: a trainer iteration after N synced with COUNT rollouts.
synced_after()
{
	awk -v n="$1" -v c="$2" '/rl trainer iter/ {
		for (i = 1; i <= NF; i++) if ($i == "iter") it = $(i + 1)
		if (it > n && / synced 1 / && $NF == c) found = 1 } END { exit !found }' "$OUT"
}

@test "RL roles: a rollout node lost costs the trainer nothing; a trainer node lost relaunches the trainer alone; a hung rollout is a loss" {
	local ck=$BATS_TEST_TMPDIR/ckpt script=$BATS_TEST_TMPDIR/job.sh conf=$BATS_TEST_TMPDIR/phalanx.yaml
	local t0 t1 i0 i1 p3 p6
	RUN=rl$$
	mkdir -p "$ck"
	# Phalanx's checkpoints every 5 iterations, in every tier.
	every_tier_conf "$conf" "$LAB_DIR/nodetmp/$RUN/%n" "$ck/shared" </dev/null
	sed -i 's/^  interval: 10$/  interval: 5/' "$conf"
	driver_script --config "$conf" --nproc-per-node 1 --hang-timeout 6 \
		--role "trainer:nodes=2:spares=1:cmd=/usr/bin/python3 $RL trainer --phalanx --iters 100000 --stop-file $ck/stop --iter-sleep 0.1" \
		--role "rollout:nodes=1-2:max-restarts=0:cmd=/usr/bin/python3 $RL rollout --gen-sleep 0.1" \
		>"$script"
	sbatch_driver 6 "$script"
	# trainer node1-2, rollout node3 and node5 (the pool up to its most),
	# the trainer's own spare node4, a shared spare node6.
	wait_for 180 synced_after 3 2
	has 'starting role trainer on 2 node(s) node\[1-2\]'
	has 'starting role rollout on 1 node(s) node3 '
	has 'starting role rollout on 1 node(s) node5 '

	# A rollout node dies: the pool shrinks, then takes the shared spare.
	i0=$(trainer_iter)
	t0=$(date +%s.%N)
	"$LAB_CMD" kill-node node5 >/dev/null
	t1=$(first_seen 'rl rollout node6 joined' 180)
	wait_for 120 synced_after "$(trainer_iter)" 2
	i1=$(trainer_iter)
	echo "# rollout node killed to the spare's rollout joined: $(echo "$t1 - $t0" | bc) s; trainer iterations meanwhile $i0 -> $i1" >&3
	# Alone in its step, node5's agent had the driver watch its beats.
	has 'lost node5: no beat from its agent for [0-9]* ms (watched from the driver)'
	has 'role rollout takes a shared spare'
	has 'starting role rollout on 1 node(s) node6 '
	# The trainer kept its processes and its iterations.
	[ "$(grep -c 'rl trainer start' "$OUT")" -eq 1 ]
	[ "$i1" -gt "$i0" ]
	p3=$(rollout_pid 3)
	p6=$(rollout_pid 6)
	[ -n "$p3" ] && [ -n "$p6" ]

	# A trainer node dies: the trainer alone relaunches on its spare, from its checkpoint.
	i0=$(trainer_iter)
	t0=$(date +%s.%N)
	"$LAB_CMD" kill-node node2 >/dev/null
	t1=$(first_seen 'rl trainer start iter [0-9]* restored 1' 180)
	i1=$(grep -o 'rl trainer start iter [0-9]* restored 1' "$OUT" | awk '{ print $5 }')
	echo "# trainer node killed to the trainer running again from its checkpoint: $(echo "$t1 - $t0" | bc) s; iteration $i0 at the kill, resumed at $i1 (a save every 5)" >&3
	has 'role trainer takes its spare'
	has 'starting role trainer on 2 node(s) node\[1,4\]'
	wait_for 120 synced_after "$(trainer_iter)" 2
	# The rollouts kept their processes and reconnected.
	[ "$(rollout_pid 3)" = "$p3" ]
	[ "$(rollout_pid 6)" = "$p6" ]
	# The trainer's checkpoints are the trainer's own; the rollouts saved none.
	ls "$ck/shared/trainer" | grep -q '^gen-'
	[ ! -e "$ck/shared/rollout" ]
	ls "$LAB_DIR/nodes/node1/tmp/$RUN/node1/trainer" | grep -q '^gen-'

	# A rollout's worker stops (SIGSTOP): no heartbeat progress, a loss.
	t0=$(date +%s.%N)
	# shellcheck disable=SC2046
	kill -STOP $(rollout_pids 6)
	wait_for 120 has 'node node6 is bad (its workers stopped beating'
	t1=$(first_seen 'role rollout goes on with 1 node(s)' 120)
	echo "# rollout worker stopped to the pool going on without its node: $(echo "$t1 - $t0" | bc) s (--hang-timeout 6)" >&3
	wait_for 120 synced_after "$(trainer_iter)" 1
	[ "$(grep -c 'rl trainer start' "$OUT")" -eq 2 ]

	# A rollout worker dies on a healthy node: that node's step alone again.
	p3=$(rollout_pid 3)
	kill -9 "$p3"
	wait_for 60 has 'role rollout: its workers failed (exit [0-9]*); relaunching it in 1 s (1 of'
	wait_for 120 synced_after "$(trainer_iter)" 1
	[ "$(grep -c 'starting role rollout on 1 node(s) node3 ' "$OUT")" -eq 2 ]
	[ "$(rollout_pid 3)" != "$p3" ]
	[ "$(grep -c 'rl trainer start' "$OUT")" -eq 2 ]

	touch "$ck/stop"
	wait_for 120 job_finished "$JOB"
	show_job
	has 'rl trainer done'
	has '^driver exit 0$'
	[ "$(job_state "$JOB")" = COMPLETED ]
}
