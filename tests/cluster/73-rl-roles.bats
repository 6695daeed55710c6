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
# its heartbeats, handled as a loss; the driver drains it, and when an
# admin resumes it the pool grows back onto it. A rollout worker killed on
# a healthy node: that node's step alone is relaunched. phalanx-ckptd, told by the
# driver, splits the job's goodput by role: the trainer's one failure is
# its own node's, and its waits on the rollouts are not productive time.
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
	# The daemon keeps the roles' goodput; it acts on nothing (role steps are the driver's).
	ckptd_env phx-rl-roles 17724 false
	start_ckptd -c "$CKPTD_DIR/daemon.yaml"
}

teardown_file()
{
	local pid

	scancel --name="$JOB_NAME" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	[ -n "${CKPTD_DIR:-}" ] && rm -rf "$CKPTD_DIR"
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

# count_above RE N: more than N lines of the job's output match RE.
count_above()
{
	[ "$(grep -c "$1" "$OUT")" -gt "$2" ]
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
	local t0 t1 i0 i1 p3 p6 j0
	RUN=rl$$
	mkdir -p "$ck"
	# Phalanx's checkpoints every 5 iterations, in every tier.
	every_tier_conf "$conf" "$LAB_DIR/nodetmp/$RUN/%n" "$ck/shared" <<-YAML
		ckptd:
		  address: "$CKPTD_ADDR"
	YAML
	sed -i 's/^  interval: 10$/  interval: 5/' "$conf"
	driver_script --config "$conf" --nproc-per-node 1 --hang-timeout 6 --drain-bad-nodes \
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

	# The driver drained node6; an admin repairs and resumes it: the job
	# still holds it (Slurm never called it DOWN), so the pool grows back.
	wait_for 30 has 'drained node node6'
	[[ $(node_state node6) == drain* ]]
	j0=$(grep -c 'rl rollout node6 joined' "$OUT")
	t0=$(date +%s.%N)
	scontrol update nodename=node6 state=resume
	wait_for 120 has 'node node6 is back: Slurm no longer drains it'
	has 'role rollout takes a node that came back (2 of 2)'
	wait_for 120 count_above 'rl rollout node6 joined' "$j0"
	t1=$(date +%s.%N)
	wait_for 120 synced_after "$(trainer_iter)" 2
	echo "# drained rollout node resumed to its rollout joined again: $(echo "$t1 - $t0" | bc) s" >&3
	[ "$(grep -c 'starting role rollout on 1 node(s) node6 ' "$OUT")" -eq 2 ]

	# A rollout worker dies on a healthy node: that node's step alone again.
	p3=$(rollout_pid 3)
	kill -9 "$p3"
	wait_for 60 has 'role rollout: its workers failed (exit [0-9]*); relaunching it in 1 s (1 of'
	wait_for 120 synced_after "$(trainer_iter)" 2
	[ "$(grep -c 'starting role rollout on 1 node(s) node3 ' "$OUT")" -eq 2 ]
	[ "$(rollout_pid 3)" != "$p3" ]
	[ "$(grep -c 'rl trainer start' "$OUT")" -eq 2 ]

	touch "$ck/stop"
	wait_for 120 job_finished "$JOB"
	show_job
	has 'rl trainer done'
	has '^driver exit 0$'
	[ "$(job_state "$JOB")" = COMPLETED ]

	# The goodput by role, as the driver told the daemon at its end.
	has 'role trainer: [0-9.]* GPU-seconds: productive'
	"$PHX" goodput "$JOB" --socket "$SOCK" | sed 's/^/# /' >&3
	"$PHX" goodput "$JOB" --socket "$SOCK" --json >"$BATS_TEST_TMPDIR/goodput.json"
	# Each synced iteration the trainer waited at least --gen-sleep (0.1 s)
	# for the rollouts' samples, on rank 0 and on rank 1 behind it: a
	# lower bound of one rank's share (reports lost with a killed node's
	# agent are at most a second of each).
	python3 - "$BATS_TEST_TMPDIR/goodput.json" "$(grep -c 'rl trainer iter .* synced 1 ' "$OUT")" <<-'PY'
		import json, sys
		rep = json.load(open(sys.argv[1]))
		synced = int(sys.argv[2])
		roles = {r["role"]: r for r in rep["roles"]}
		t, ro = roles["trainer"], roles["rollout"]
		tp, rp = t["parts"], ro["parts"]
		print(f"trainer waited {tp['waiting']:.1f} GPU-s over {synced} synced iterations", file=sys.stderr)
		# The rollout losses are not the trainer's: its one failure is its node.
		assert t["failures"] == 1, t
		# Node killed, node hung, worker killed.
		assert ro["failures"] >= 3, ro
		assert tp["waiting"] >= 0.1 * synced * 0.9, (tp, synced)
		assert tp["productive"] > 0 and rp["productive"] > 0 and rp["waiting"] > 0
		# A killed node's last words to its loss being noticed.
		assert tp["detection"] > 0 and rp["detection"] > 0, (tp, rp)
		assert tp["restart"] > 0 and rp["restart"] > 0, (tp, rp)
		for r in (t, ro):
		    assert abs(sum(r["parts"].values()) - r["gpu_s"]) < 0.01 * r["gpu_s"] + 0.01, r
	PY
}
