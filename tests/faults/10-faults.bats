#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Faults injected into a real PyTorch DDP job (gloo, CPU) on 4 nodes of
# the lab and a spare, under phalanx-launch's driver, saving through
# Phalanx, phalanx-ckptd keeping its ledger and catalog. The trainer's data
# depends only on (rank, step), so its final weights depend only on the
# steps taken: an uninterrupted run gives the reference, and every test
# injects one fault at a random step (printed) and checks that the job
# completes on the reference's bits, resumed from the newest generation
# committed before the fault, and that its goodput parts add up to its
# wall time; it prints the recovery figures. Seven nodes: a job that
# loses two of its five is requeued onto five others.
#
# lab-nodes: 7

load ../cluster/lib
load ../cluster/driver_jobs
load faults

setup_file()
{
	faults_setup_file
}

teardown_file()
{
	faults_teardown_file
}

setup()
{
	FAULT_STEP=0 FAULT_T= RESUME_S= NO_RESTORE=0 CUT= FILLED=
}

# A killed, cut or drained node comes back for the next test.
teardown()
{
	if [ -n "$FILLED" ]; then
		nsenter -t "$(slurmd_of "$FILLED")" -m -r umount "$LAB_DIR/nodetmp/$RUN/node$FILLED" || true
	fi
	if [ -n "$CUT" ]; then
		# Its agent and workers never heard of the relaunch: gone with it.
		"$LAB_CMD" kill-node "$CUT" >/dev/null 2>&1 || true
		"$LAB_CMD" heal-node "$CUT" >/dev/null 2>&1 || true
	fi
	reset_nodes
}

# The slurmd of node I: the processes of node I's steps share its mount namespace.
slurmd_of()
{
	ip netns pids "$(lab_netns "$1")" | xargs -r ps -o pid=,comm= -p |
		awk '$2 == "slurmd" { print $1; exit }'
}

@test "a worker killed: its agent restarts the node's workers from memory" {
	local n pid

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	n=$((1 + RANDOM % 4))
	pid=$(workers_of "$n" | shuf -n 1)
	echo "# killing worker $pid on node$n" >&3
	kill -KILL "$pid"
	time_to_resume
	check_recovered
	has 'restoring generation [0-9]* from memory'
	[ "$(step_nodes 2)" = '' ]
}

@test "a worker stopped (SIGSTOP, a hang): found by its heartbeat and restarted" {
	local n pid

	submit_train "$BATS_TEST_NUMBER" --hang-timeout 5
	at_random_step
	n=$((1 + RANDOM % 4))
	pid=$(workers_of "$n" | shuf -n 1)
	echo "# stopping worker $pid on node$n" >&3
	kill -STOP "$pid"
	time_to_resume
	check_recovered
	has 'hung'
}

@test "an agent killed: its node is bad, the spare takes its place" {
	local n pid

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	n=$((1 + RANDOM % 4))
	pid=$(agent_pid "$n")
	echo "# killing the agent $pid of node$n" >&3
	kill -KILL "$pid"
	time_to_resume
	check_recovered
	has "node node$n is bad"
	[ "$(step_nodes 2 | tr -d '[]')" != "$(step_nodes 1 | tr -d '[]')" ]
	grep -q '^\[rank [0-9]\] \[rank [0-9]@node5\] resumed from generation' "$OUT"
}

@test "a node killed (lab kill-node): the spare restores its ranks from the partner's copy" {
	local node

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	node=$(random_node)
	echo "# killing $node" >&3
	"$LAB_CMD" kill-node "$node" >/dev/null
	time_to_resume
	check_recovered
	# Its watchers found it before Slurm did (SlurmdTimeout).
	has "node $node is bad (its agent stopped beating"
	grep -q '^\[rank [0-9]\] \[rank [0-9]@node5\] resumed from generation' "$OUT"
	# The lost node's ranks come from its partner's copy, not the shared tier.
	grep -q 'rank [0-9]: generation [0-9]* from its partner copy, verified' "$OUT"
}

@test "a node cut off the network (lab cut-node): the spare takes its place" {
	local node

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	node=$(random_node)
	CUT=$node
	echo "# cutting $node off" >&3
	"$LAB_CMD" cut-node "$node" >/dev/null
	time_to_resume
	check_recovered
	has "node $node is bad (its agent stopped beating"
	grep -q '^\[rank [0-9]\] \[rank [0-9]@node5\] resumed from generation' "$OUT"
}

local_save_failed()
{
	grep -q 'cannot write the shard of rank [0-9]*, step [0-9]* to .*: No space left on device' "$OUT"
}

@test "the checkpoint file system full during a save: training goes on, committed generations stay" {
	local n dir latest

	n=$((1 + RANDOM % 4))
	dir=$LAB_DIR/nodetmp/$(run_name "$BATS_TEST_NUMBER")/node$n
	mkdir -p "$LAB_DIR/nodes/node$n/tmp/$(run_name "$BATS_TEST_NUMBER")/node$n"
	# A small file system of node n's own for its local tier.
	nsenter -t "$(slurmd_of "$n")" -m -r mount -t tmpfs -o size=2m phx-faults "$dir"
	FILLED=$n
	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	echo "# filling node$n's local tier" >&3
	nsenter -t "$(slurmd_of "$n")" -m -r sh -c "cat /dev/zero >'$dir/fill'" 2>/dev/null || true
	wait_for 60 local_save_failed
	# The newest generation committed before it is still whole there
	# (the file system is node n's own: read in its mount namespace).
	latest=$(nsenter -t "$(slurmd_of "$n")" -m -r cat "$dir/latest")
	echo "latest local generation while full: $latest"
	[ "$((10#${latest#gen-}))" -ge "$FAULT_STEP" ]
	nsenter -t "$(slurmd_of "$n")" -m -r test -s "$dir/$latest/manifest.json"
	nsenter -t "$(slurmd_of "$n")" -m -r rm -f "$dir/fill"
	NO_RESTORE=1
	check_recovered
	grep -q "checkpoint generation $STEPS committed in the local tier" "$OUT"
	[ "$(nsenter -t "$(slurmd_of "$n")" -m -r cat "$dir/latest")" = "$(printf 'gen-%012d' "$STEPS")" ]
}

@test "a committed shard corrupted: found at the restore, another copy of the same generation used" {
	local node n gen shard r

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	node=$(random_node)
	echo "# killing $node" >&3
	"$LAB_CMD" kill-node "$node" >/dev/null
	# Once the step is over, nothing commits: corrupt the newest
	# generation's shard of a rank on a node that stays, and keeps its
	# ranks (the nodes before the killed one).
	wait_for 60 has "node $node is bad"
	n=$((1 + RANDOM % (${node#node} - 1)))
	gen=$(cat "$(local_tier "$n")/latest")
	shard=$(ls "$(local_tier "$n")/$gen"/rank-*.shard | shuf -n 1)
	echo "# corrupting $shard" >&3
	corrupt "$shard"
	time_to_resume
	check_recovered
	grep -q "$(basename "$shard") does not match its [a-z0-9-]* digest (corrupt); trying the next source" "$OUT"
	r=${shard##*rank-}
	grep -q "rank ${r%.shard}: generation $((10#${gen#gen-})) from the shared tier" "$OUT"
}

# The newest step the agents committed in the local tier (0: none).
agents_committed()
{
	sed -n 's/.*checkpoint generation \([0-9]*\) committed in the local tier.*/\1/p' "$OUT" |
		sort -n | tail -n 1 | grep . || echo 0
}

agents_committed_above()
{
	[ "$(agents_committed)" -gt "$1" ]
}

@test "phalanx-ckptd killed mid-commit and restarted: training goes on, nothing committed is lost" {
	local pid before

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	# Stopped, the daemon leaves the agents' prepares of the next generation
	# unread in its sockets: killed then, it dies in the middle of that commit.
	pid=$(cat "$CKPTD_DIR/pid")
	kill -STOP "$pid"
	before=$(agents_committed)
	wait_for 60 agents_committed_above "$before" || {
		kill -CONT "$pid"
		false
	}
	echo "# killing phalanx-ckptd with the prepares of step $(agents_committed) unread" >&3
	kill -KILL "$pid"
	start_daemon
	NO_RESTORE=1
	check_recovered
	# Training never waited for it: no save was skipped, and generations
	# were committed in the daemon again after its return.
	! has 'skipped'
	[ "$(grep -c 'phalanx-ckptd 0.1.0: agents on' "$CKPTD_DIR/daemon.log")" -ge 2 ]
	sed -n '/phalanx-ckptd 0.1.0: agents on/h; /phalanx-ckptd 0.1.0: agents on/!H; ${x;p}' \
		"$CKPTD_DIR/daemon.log" | grep -q "job $JOB: generation [0-9]* (step $STEPS) committed"
}

@test "two nodes killed with one spare: the job is requeued without them and resumes" {
	local a b

	submit_train "$BATS_TEST_NUMBER"
	at_random_step
	a=$(random_node)
	b=node$(( (${a#node} - 1) % 3 + 2 ))
	echo "# killing $a and $b" >&3
	"$LAB_CMD" kill-node "$a" >/dev/null &
	"$LAB_CMD" kill-node "$b" >/dev/null
	wait
	time_to_resume
	check_recovered
	has "requeueing job $JOB: only [0-9]* healthy node(s) left"
	[ "$(job_field "$JOB" Restarts)" -ge 1 ]
	# The requeued run ran on none of the dead nodes.
	for n in $(scontrol show hostnames "$(job_field "$JOB" NodeList)"); do
		[ "$n" != "$a" ] && [ "$n" != "$b" ]
	done
	[ "$(gp_field_requeues)" -ge 1 ]
}

gp_field_requeues()
{
	"$PHX" goodput "$JOB" --json --socket "$SOCK" | jq -r .requeues
}
