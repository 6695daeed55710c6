#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Checkpoints through libphalanx on the lab: a PyTorch DDP job saves every
# few steps into memory its node agent owns; the agents persist the shards
# to a node-local and a shared directory and commit generations together.
# Killed workers and killed agents, at random points, never cost the last
# committed generation: it restores bit-identically (the SHA-256 of the
# restored shard is the one its rank printed when saving). A corrupted
# shard is found and another source or the previous generation is used.

load lib

setup_file()
{
	require_lab
	need_launch_lab 2 || return 1
	use_python_module
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	export JOB_NAME=phx-ckpt-tests SLURM_JOB_NAME=phx-ckpt-tests
	# Inside node I the lab's nodetmp is node I's own directory.
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
}

setup()
{
	SHARED=$BATS_TEST_TMPDIR/shared
	CONF=$BATS_TEST_TMPDIR/phalanx.yaml
	RUN=ck$BATS_TEST_NUMBER.$$
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$CONF"
	cat >>"$CONF" <<EOC
checkpoint:
  keep: 2
  interval: 5
  local_dir: "$LAB_DIR/nodetmp/$RUN/%n"
  local_every: 1
  shared_dir: "$SHARED"
  shared_every: 2
EOC
	export GLOO_SOCKET_IFNAME=eth0
}

teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	if [ -n "${BG:-}" ]; then
		wait "$BG" || true
	fi
	BG=
	rm -rf "$LAB_DIR"/nodes/node*/tmp/"$RUN"
}

# job OUT [phalanx-launch options] -- [train.py options]: 2 nodes x 2 workers.
job()
{
	local out=$1
	shift
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	# -K1: an agent killed ends the step at once (the driver's job in production).
	# -w: the same two nodes every run, whose local tiers the next run restores
	# from (after a killed step Slurm may still be completing node1, and
	# would give -N2 another pair).
	timeout 240 srun --mpi=pmix -N2 -w node[1-2] --ntasks-per-node=1 -K1 "$LAUNCH" --agent \
		--config "$CONF" \
		--nproc-per-node 2 --sync-interval-ms 300 "${opts[@]}" -- \
		/usr/bin/python3 "$TRAIN" --phalanx --log-digest --step-sleep 0.05 "$@" >"$out" 2>&1 || {
		local rc=$?
		cat "$out"
		return $rc
	}
}

# The digest rank $2 printed when it saved step $3, in file $1.
saved_sha()
{
	awk -v r="[rank $2]" -v s="$3" '$1" "$2 == r && $5 == "saved" && $7 == s { print $9 }' "$1" |
		tail -1
}

# "STEP SHA" of each restore of rank $2 in file $1.
restored()
{
	awk -v r="[rank $2]" '$1" "$2 == r && $5 == "restored" { print $7, $9 }' "$1"
}

# Every restore in $2 must be bit-identical to what was saved (in $1 or $2).
check_restores()
{
	local r step sha n=0
	for r in 0 1 2 3; do
		while read -r step sha; do
			[ -n "$step" ] || continue
			[ "$sha" = "$(saved_sha "$1" "$r" "$step")" ] || {
				echo "rank $r restored step $step with sha $sha, saved $(saved_sha "$1" "$r" "$step")" >&2
				return 1
			}
			n=$((n + 1))
		done < <(restored "$2" "$r")
	done
	echo "restores checked: $n" >&2
	[ "$n" -gt 0 ]
}

node_local()
{
	echo "$LAB_DIR/nodes/node$1/tmp/$RUN/node$1"
}

@test "generations are published in both tiers, collected, and restored bit-identically" {
	local out1=$BATS_TEST_TMPDIR/run1 out2=$BATS_TEST_TMPDIR/run2 gens
	job "$out1" -- --steps 30
	cat "$out1"
	grep -q 'checkpoint generation 30 committed in the local tier on all 2 nodes' "$out1"
	grep -q 'checkpoint generation 30 committed in the memory tier' "$out1"
	grep -q 'checkpoint generation 20 committed in the shared tier' "$out1"
	[ "$(grep -c ' saved step 30 sha256 ' "$out1")" -eq 4 ]
	# Local: the newest two generations, each with its manifest; latest points at 30.
	gens=$(ls "$(node_local 1)" | grep '^gen-' | tr '\n' ' ')
	[ "$gens" = "gen-000000000025 gen-000000000030 " ]
	[ "$(cat "$(node_local 1)/latest")" = gen-000000000030 ]
	[ -f "$(node_local 2)/gen-000000000030/manifest.json" ]
	[ -f "$(node_local 2)/gen-000000000030/rank-3.shard" ]
	# The manifest lists every rank, with its node, size, digest and place.
	grep -q '"world":4' "$(node_local 2)/gen-000000000030/manifest.json"
	grep -q '"rank":0,"node":"node1"' "$(node_local 2)/gen-000000000030/manifest.json"
	grep -q "\"tier\":\"local\",\"path\":\"$LAB_DIR/nodetmp/$RUN/node2/gen-000000000030/rank-3.shard\"" \
		"$(node_local 2)/gen-000000000030/manifest.json"
	# Shared: every other save, both nodes' shards, one manifest.
	ls "$SHARED/gen-000000000030" | sort | tr '\n' ' ' | grep -q '^manifest.json rank-0.shard rank-1.shard rank-2.shard rank-3.shard $'
	[ "$(cat "$SHARED/latest")" = gen-000000000030 ]
	ls "$SHARED" | grep -q '^gen-000000000020$'
	job "$out2" -- --steps 35
	cat "$out2"
	grep -q 'restoring checkpoint generation 30 (every shard verified)' "$out2"
	[ "$(grep -c 'resumed from generation 30 at step 30' "$out2")" -eq 4 ]
	check_restores "$out1" "$out2"
}

@test "a save is durable when its handle says so: the node's directory holds its manifest then" {
	local out=$BATS_TEST_TMPDIR/run step latest manifest n=0
	job "$out" -- --steps 20 --wait-durable "$LAB_DIR/nodetmp/$RUN/%n"
	cat "$out"
	# Each rank waited for each of its 4 saves (steps 5, 10, 15, 20) ...
	[ "$(grep -c ' durable step [0-9]*: True ' "$out")" -eq 16 ]
	! grep -q ' durable step [0-9]*: False ' "$out"
	# ... and at that moment its node's local tier had that generation (or a
	# newer one) published: latest pointing at it, its manifest written.
	while read -r step latest manifest; do
		[ "$manifest" = True ]
		[ $((10#${latest#gen-})) -ge "$step" ]
		n=$((n + 1))
	done < <(awk '$5 == "durable" { sub(":", "", $7); print $7, $10, $12 }' "$out")
	[ "$n" -eq 16 ]
}

@test "a job's own --ckpt-dir, --save-interval and --keep go over the site's" {
	local out=$BATS_TEST_TMPDIR/run mine=$BATS_TEST_TMPDIR/mine
	job "$out" --ckpt-dir "$mine" --save-interval 10 --keep 1 -- --steps 30
	cat "$out"
	# Saves every 10 steps, not the site's 5.
	[ "$(grep -c ' saved step 30 sha256 ' "$out")" -eq 4 ]
	[ "$(grep -c ' saved step \(5\|15\|25\) sha256 ' "$out")" -eq 0 ]
	grep -q 'checkpoint generation 30 committed in the local tier on all 2 nodes' "$out"
	# One generation kept, not the site's 2.
	[ "$(ls "$(node_local 1)" | grep '^gen-' | tr '\n' ' ')" = "gen-000000000030 " ]
	# The shared tier is the job's folder; the site's has nothing of it.
	ls "$mine" | grep -q '^gen-'
	[ ! -e "$SHARED" ] || [ -z "$(ls -A "$SHARED")" ]
}

@test "a worker killed at a random point: the in-job restart restores from memory" {
	local out=$BATS_TEST_TMPDIR/run pid
	job "$out" --max-restarts 1 -- --steps 40 --state-mb 16 &
	BG=$!
	wait_for 60 test -f "$out"
	wait_for 120 grep -q ' saved step 5 sha256' "$out"
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", r / 32767 * 1.5 }')"
	pid=$(pgrep -f "^/usr/bin/python3 $TRAIN" | shuf -n1)
	kill -KILL "$pid"
	wait "$BG"
	BG=
	cat "$out"
	grep -q 'restarting all 4 workers (restart 1 of 1)' "$out"
	[ "$(grep -c 'restoring generation [0-9]* from memory' "$out")" -eq 4 ]
	check_restores "$out" "$out"
	grep -q 'finished 40 steps.*replicas identical: True' "$out"
}

@test "an agent killed at a random point: the next run restores the previous committed generation" {
	local out1=$BATS_TEST_TMPDIR/run1 out2=$BATS_TEST_TMPDIR/run2 agent i
	for i in 1 2; do
		job "$out1.$i" -- --steps 200 --state-mb 16 &
		BG=$!
		wait_for 60 test -f "$out1.$i"
		wait_for 120 grep -q 'generation [0-9]* committed in the local tier' "$out1.$i"
		sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", r / 32767 * 2 }')"
		agent=$(pgrep -f "^$LAUNCH --agent --config $CONF" | shuf -n1)
		kill -KILL "$agent"
		wait "$BG" || true
		BG=
		cat "$out1.$i"
		cat "$out1".* >"$out1"
		job "$out2.$i" -- --steps 1 --state-mb 16
		cat "$out2.$i"
		grep -q 'restoring checkpoint generation [0-9]* (every shard verified)' "$out2.$i"
		check_restores "$out1" "$out2.$i"
	done
}

@test "a corrupt local shard is found: the shared copy, then the previous generation, is used" {
	local out1=$BATS_TEST_TMPDIR/run1 out2=$BATS_TEST_TMPDIR/run2 out3=$BATS_TEST_TMPDIR/run3
	job "$out1" -- --steps 20
	# Flip one byte in the middle of rank 1's newest local shard.
	corrupt "$(node_local 1)/gen-000000000020/rank-1.shard"
	job "$out2" -- --steps 20
	cat "$out2"
	grep -q 'rank-1.shard does not match its xxh3-128 digest (corrupt); trying the next source' "$out2"
	grep -q 'rank 1: generation 20 from the shared tier' "$out2"
	grep -q 'restoring checkpoint generation 20 (every shard verified)' "$out2"
	check_restores "$out1" "$out2"
	# Now the shared copy too: generation 20 has no good copy of rank 1 left.
	corrupt "$SHARED/gen-000000000020/rank-1.shard"
	job "$out3" -- --steps 20
	cat "$out3"
	grep -q 'generation 20 cannot be restored on node1 (rank 1 has no good copy); falling back' "$out3"
	grep -q 'restoring checkpoint generation 15 (every shard verified)' "$out3"
	check_restores "$out1" "$out3"
}

@test "a node lost between steps of a job: its ranks restore from the partner's copy" {
	local out1=$BATS_TEST_TMPDIR/run1 out2=$BATS_TEST_TMPDIR/run2 alloc
	# No shared tier: the node that replaces node2 finds its ranks nowhere but at node2's partner.
	sed -i '/shared_dir:/d; /shared_every:/d' "$CONF"
	alloc=$(sbatch --parsable -N3 -w node1,node2,node3 -J "$JOB_NAME" -o /dev/null --wrap 'sleep 600')
	wait_for 60 job_running "$alloc"
	step "$alloc" node1,node2 "$out1" --steps 20
	cat "$out1"
	grep -q 'partner copies on' "$out1"
	grep -q 'checkpoint generation 20 committed in the local tier on all 2 nodes' "$out1"
	# node1 keeps node2's shards (ranks 2 and 3) on disk while the local tier
	# keeps their generations: keep (2) + 2, here every save (steps 5-20).
	ls "$(node_local 1)/partner/rank-2" | tr '\n' ' ' |
		grep -q '^gen-000000000006.copy gen-000000000011.copy gen-000000000016.copy gen-000000000021.copy $'
	# node2 is gone; node3 runs its ranks and has never seen them.
	step "$alloc" node1,node3 "$out2" --steps 25
	cat "$out2"
	grep -q 'rank 2: sent its partner copy of generation 20 to node3' "$out2"
	grep -q 'rank 3: sent its partner copy of generation 20 to node3' "$out2"
	grep -q 'rank 2: generation 20 from its partner copy, verified' "$out2"
	grep -q 'rank 3: generation 20 from its partner copy, verified' "$out2"
	grep -q 'restoring checkpoint generation 20 (every shard verified)' "$out2"
	[ "$(grep -c 'resumed from generation 20 at step 20' "$out2")" -eq 4 ]
	check_restores "$out1" "$out2"
	scancel "$alloc"
	wait_for 30 job_finished "$alloc"
}

# The port node $1's agent takes partner copies on: the one TCP listener
# that is its own (it also holds slurmstepd's, inherited).
partner_port()
{
	ip netns exec "$(lab_netns "$1")" ss -Hltnp |
		awk '$NF ~ /^users:\(\("phalanx-launch",[^)]*\)\)$/ { n = split($4, a, ":"); print a[n]; exit }'
}

partner_listening()
{
	[ -n "$(partner_port "$1")" ]
}

@test "strangers holding a node's partner connections do not keep its partner out" {
	local out=$BATS_TEST_TMPDIR/run atk=$BATS_TEST_TMPDIR/attack port r
	sed -i '/shared_dir:/d; /shared_every:/d' "$CONF"
	job "$out" -- --steps 40 --step-sleep 0.3 &
	BG=$!
	wait_for 60 partner_listening 1
	port=$(partner_port 1)
	# From node2, the address node1's partner sends from: more connections
	# than one address may hold, each trickling a header it never finishes,
	# reopened as soon as node1 closes it, from before the first save.
	ip netns exec "$(lab_netns 2)" /usr/bin/python3 \
		"$BATS_TEST_DIRNAME/../security/slow_partner.py" \
		"10.77.${PHX_LAB_ID:-0}.11:$port" 15 6 >"$atk" &
	wait "$BG"
	BG=
	wait
	cat "$out" "$atk"
	grep -q 'checkpoint generation 40 committed in the local tier on all 2 nodes' "$out"
	# The strangers were there, and were pushed out for the partner.
	read -r _ opened _ closed _ <"$atk"
	[ "$opened" -gt 6 ]
	[ "$closed" -gt 0 ]
	grep -q 'partner copies: [0-9]* connection(s) without a signed header pushed out' "$out"
	# Not one copy lost (before: "no partner copy of step 5 on node1:
	# Connection reset by peer" until the strangers left).
	[ "$(grep -c 'no partner copy of step\|partner copy refused' "$out")" -eq 0 ]
	# node1 holds node2's ranks of the last save, and of every save kept.
	for r in 2 3; do
		ls "$(node_local 1)/partner/rank-$r" | tr '\n' ' ' |
			grep -q '^gen-000000000026.copy gen-000000000031.copy gen-000000000036.copy gen-000000000041.copy $'
	done
}

# step JOB NODES OUT [train.py options]: a step of 2 workers on each of NODES in allocation JOB.
step()
{
	local job=$1 nodes=$2 out=$3
	shift 3
	timeout 240 srun --jobid="$job" --overlap --mpi=pmix -N2 -w "$nodes" --ntasks-per-node=1 -K1 \
		"$LAUNCH" --agent --config "$CONF" --nproc-per-node 2 --sync-interval-ms 300 -- \
		/usr/bin/python3 "$TRAIN" --phalanx --log-digest --step-sleep 0.05 "$@" >"$out" 2>&1 || {
		local rc=$?
		cat "$out"
		return $rc
	}
}
