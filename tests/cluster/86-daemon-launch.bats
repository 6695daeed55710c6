#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch agents reporting to phalanx-ckptd (daemon on the host side
# of the lab, real PyTorch DDP jobs saving through libphalanx): the agents
# register and heartbeat, the generations they commit are cataloged with
# their digests, a killed worker is a restart in the goodput ledger, a
# straggler is straggler time there, a killed node is declared lost from the agents' missing heartbeats, and a
# daemon killed and restarted mid-run never stops training: the reports
# made while it was away arrive when it returns.

load lib

setup_file()
{
	require_lab
	lab_has_plugin || skip "the lab was brought up with --no-plugin (no job tokens)"
	need_launch_lab 2 || return 1
	use_python_module
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	export JOB_NAME=phx-daemon-launch SLURM_JOB_NAME=phx-daemon-launch
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_CMD=${LAB_CMD:-$BATS_TEST_DIRNAME/lab}
	# act: false: a lost node is declared and accounted, not drained, so
	# the lab keeps its nodes for the other tests.
	ckptd_env phx-daemon-launch 17704 false
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$CKPTD_DIR/phalanx.yaml"
	# sha256 here; phalanx ckpt verify checks xxh3-128 the same way (unit tested).
	cat >>"$CKPTD_DIR/phalanx.yaml" <<-YAML
		ckptd:
		  address: "$CKPTD_ADDR"
		checkpoint:
		  keep: 3
		  interval: 5
		  shared_dir: "$CKPTD_DIR/shared"
		  shared_every: 1
		  digest: sha256
		launcher:
		  kernel_log: "$CKPTD_DIR/kmsg-%n"
	YAML
	# Each node's own "kernel log", as the agents watch it for Xid errors.
	for n in 1 2 3 4; do
		: >"$CKPTD_DIR/kmsg-node$n"
	done
	start_daemon
}

start_daemon()
{
	start_ckptd -c "$CKPTD_DIR/daemon.yaml"
}

teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	if [ -n "${BG:-}" ]; then
		wait "$BG" || true
	fi
	BG=
}

teardown_file()
{
	local pid n

	scancel --name="$JOB_NAME" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	for n in node1 node2 node3 node4; do
		node_state "$n" | grep -q '^down' && "$LAB_CMD" restart-node "$n" >/dev/null 2>&1
	done
	[ -f "$CKPTD_DIR/daemon.log" ] && sed 's/^/# daemon: /' "$CKPTD_DIR/daemon.log" >&3
	[ -n "${CKPTD_DIR:-}" ] && rm -rf "$CKPTD_DIR"
}

# Waits for the job started by job(); its output on failure.
job_wait()
{
	local rc=0
	wait "$BG" || rc=$?
	BG=
	[ "$rc" -eq 0 ] || sed 's/^/# job: /' "$1" >&3
	return "$rc"
}

# job OUT [phalanx-launch options] -- [train.py options]: 2 nodes x 2 workers, in the background (BG).
job()
{
	local out=$1 before
	shift
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	before=$(job_id) || before=0
	GLOO_SOCKET_IFNAME=eth0 lab_srun 240 --mpi=pmix -N2 --ntasks-per-node=1 -K1 \
		"$LAUNCH" --agent --config "$CKPTD_DIR/phalanx.yaml" --nproc-per-node 2 \
		--sync-interval-ms 300 "${opts[@]}" -- \
		/usr/bin/python3 "$TRAIN" --phalanx --step-sleep 0.05 "$@" >"$out" 2>&1 &
	BG=$!
	await_job_after "$before"
}

# The newest job of the tests.
job_id()
{
	squeue -h --name="$JOB_NAME" -o %i | sort -n | tail -n 1 | grep .
}

job_id_above()
{
	local id

	id=$(job_id) && [ "$id" -gt "$1" ]
}

# await_job_after BEFORE: JOB is the first job newer than BEFORE (the newest
# job when the srun was started, 0 if none); an earlier test's job may still
# be completing (a killed node's).
await_job_after()
{
	wait_for 30 job_id_above "$1"
	JOB=$(job_id)
}

status_field()
{
	"$PHX" status --json --socket "$SOCK" | jq -r ".jobs[] | select(.job == $1) | $2"
}

gp_field()
{
	"$PHX" goodput "$1" --json --socket "$SOCK" | jq -r "$2"
}

agents_are()
{
	[ "$(status_field "$1" .agents 2>/dev/null)" = "$2" ]
}

committed_above()
{
	[ "$(status_field "$1" .committed 2>/dev/null)" -gt "$2" ] 2>/dev/null
}

restarts_at_least()
{
	[ "$(gp_field "$1" .restarts 2>/dev/null)" -ge "$2" ] 2>/dev/null
}

# catalog_matches JOB GEN MANIFEST: the daemon's journaled commit of GEN has,
# for every rank, the node, size and digest of the agents' MANIFEST.
catalog_matches()
{
	/usr/bin/python3 - "$CKPTD_DIR/state/ckptd.journal" "$@" <<-'PY'
		import json, sys
		journal, job, gen, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
		text = open(journal, "rb").read().decode("latin-1")
		dec, at, found = json.JSONDecoder(), 0, None
		while (at := text.find('{"op":"commit"', at)) >= 0:
		    rec, end = dec.raw_decode(text, at)
		    at = end
		    m = rec["manifest"]
		    if rec["job"] == job and m["generation"] == gen:
		        found = m
		agents = json.load(open(path))
		assert found, f"generation {gen} of job {job} is not in the journal"
		key = lambda s: (s["rank"], s["node"], s["bytes"], s["digest"]["alg"], s["digest"]["hex"])
		mine = sorted(map(key, found["shards"]))
		theirs = sorted(map(key, agents["shards"]))
		assert mine == theirs, f"catalog {mine} != agents' {theirs}"
		print(f"{len(mine)} shards match")
	PY
}

# corrupt_rank GEN RANK: flips a byte in the middle of every copy of RANK's
# shard in cataloged generation GEN that this host can read.
corrupt_rank()
{
	local path n=0

	# The agents' manifest: the catalog holds the same shards (catalog_matches).
	for path in $(jq -r --argjson r "$2" '.shards[$r].locations[].path' \
		"$CKPTD_DIR/shared/$(printf 'gen-%012d' $(($1 - 1)))/manifest.json"); do
		[ -f "$path" ] || continue
		/usr/bin/python3 - "$path" <<-'PY'
			import os, sys
			with open(sys.argv[1], "r+b") as f:
			    f.seek(os.fstat(f.fileno()).st_size // 2)
			    b = f.read(1)
			    f.seek(-1, 1)
			    f.write(bytes([b[0] ^ 0x5a]))
		PY
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
}

@test "agents register, heartbeat and have their committed generations cataloged with their digests" {
	local out=$BATS_TEST_TMPDIR/out gen

	job "$out" -- --steps 60
	wait_for 60 agents_are "$JOB" 2
	job_wait "$out"
	# The heartbeats carried the training steps: the ledger saw progress.
	run "$PHX" goodput "$JOB" --json --socket "$SOCK"
	show_run
	[ "$(jq -r .phase <<<"$output")" = done ]
	[ "$(jq -r '.parts.productive > 0' <<<"$output")" = true ]
	# The agents reported each save's stall (their slowest worker's copy) and persist lag.
	[ "$(jq -r '.parts.checkpoint_stall > 0' <<<"$output")" = true ]
	run curl -sf "http://$CKPTD_METRICS/metrics"
	[ "$status" -eq 0 ]
	awk '$1 == "phalanx_ckptd_save_stall_seconds_count" && $2 > 0 { ok = 1 } END { exit !ok }' <<<"$output"
	awk '$1 == "phalanx_ckptd_persist_lag_seconds_count" && $2 > 0 { ok = 1 } END { exit !ok }' <<<"$output"
	run --separate-stderr "$PHX" ckpt ls --job "$JOB" --socket "$SOCK"
	show_run
	[ "$status" -eq 0 ]
	# The newest cataloged generation is the agents' last commit (generation = step + 1).
	gen=$(awk -v j="$JOB" '$1 == j { print $2 }' <<<"$output" | sort -n | tail -n 1)
	[ "$gen" -ge 2 ]
	grep -q "generation $((gen - 1)) committed in the shared tier" "$out"
	# The catalog holds the digests the agents put in their own manifest.
	run catalog_matches "$JOB" "$gen" "$CKPTD_DIR/shared/$(printf 'gen-%012d' $((gen - 1)))/manifest.json"
	show_run
	[ "$status" -eq 0 ]
	[ "$output" = "4 shards match" ]
	# The agents' chunked sha256 digests are the ones verify computes.
	run --separate-stderr "$PHX" ckpt verify "$JOB" "$gen" --socket "$SOCK"
	show_run
	[ "$status" -eq 0 ]
	grep -q "generation $gen (step [0-9]*, 4 ranks): 4 verified, 0 corrupt" <<<"$output"
	# One byte changed in every copy of rank 1 this host can read: verify names it.
	corrupt_rank "$gen" 1
	run --separate-stderr "$PHX" ckpt verify "$JOB" "$gen" --socket "$SOCK"
	show_run
	[ "$status" -eq 1 ]
	grep -q "rank 1: [a-z]* copy is corrupt: .* does not match its sha256 digest" <<<"$stderr"
	grep -q "3 verified, 1 corrupt" <<<"$output"
}

@test "a killed worker is an in-job restart in the goodput ledger" {
	local out=$BATS_TEST_TMPDIR/out pid

	job "$out" --max-restarts 2 -- --steps 400
	wait_for 60 agents_are "$JOB" 2
	wait_for 60 committed_above "$JOB" 0
	pid=$(pgrep -f "^/usr/bin/python3 $TRAIN" | shuf -n1)
	kill -KILL "$pid"
	wait_for 30 restarts_at_least "$JOB" 1
	run "$PHX" goodput "$JOB" --socket "$SOCK"
	show_run
	grep -q "in-job restarts 1" <<<"$output"
	# The crash report arrived before the restart (it counts it).
	grep -q "job $JOB: crash on " "$CKPTD_DIR/daemon.log"
}

@test "phalanx-ckptd killed and restarted mid-run: training goes on, reports arrive when it returns" {
	local out=$BATS_TEST_TMPDIR/out pid before lines

	job "$out" --max-restarts 2 -- --steps 300
	wait_for 60 agents_are "$JOB" 2
	wait_for 60 committed_above "$JOB" 0
	before=$(status_field "$JOB" .committed)
	kill -KILL "$(cat "$CKPTD_DIR/pid")"
	# Training goes on without the daemon, through a worker's restart too.
	lines=$(wc -l <"$out")
	pid=$(pgrep -f "^/usr/bin/python3 $TRAIN" | shuf -n1)
	kill -KILL "$pid"
	sleep 3
	kill -0 "$BG"
	[ "$(wc -l <"$out")" -gt "$lines" ]
	start_daemon
	# The agents reconnect, the queued crash and restart arrive, and
	# generations committed meanwhile or later are cataloged.
	wait_for 30 agents_are "$JOB" 2
	wait_for 30 restarts_at_least "$JOB" 1
	wait_for 60 committed_above "$JOB" "$before"
	job_wait "$out"
	[ "$(gp_field "$JOB" .phase)" = done ]
}

@test "a straggler reported by the agents is straggler time in the goodput ledger" {
	local out=$BATS_TEST_TMPDIR/out before

	before=$(job_id) || before=0
	# The probe beats through libphalanx; rank 3 (on node 2) steps 5 times slower.
	PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so timeout 120 srun --mpi=pmix \
		-N2 --ntasks-per-node=1 "$LAUNCH" --agent --config "$CKPTD_DIR/phalanx.yaml" \
		--nproc-per-node 2 --sync-interval-ms 250 --straggler-window 3 \
		--straggler-threshold 150 -- /usr/bin/python3 "$BATS_TEST_DIRNAME/launch_probe.py" \
		--mode beat --duration 9 --step-sleep 0.05 --rank 3 --slow 5 >"$out" 2>&1 &
	BG=$!
	await_job_after "$before"
	job_wait "$out"
	grep -q "straggler: rank 3 " "$out"
	run "$PHX" goodput "$JOB" --json --socket "$SOCK"
	show_run
	[ "$(jq -r '.parts.straggler > 0' <<<"$output")" = true ]
}

@test "a killed node of a running job is declared lost within recovery.lost_after_ms" {
	local out=$BATS_TEST_TMPDIR/out victim secs

	job "$out" -- --steps 2000
	wait_for 60 agents_are "$JOB" 2
	victim=$(scontrol show hostnames "$(squeue -h -j "$JOB" -o %N)" | tail -n 1)
	"$LAB_CMD" kill-node "$victim"
	wait_for 30 grep -q "job $JOB: node $victim lost" "$CKPTD_DIR/daemon.log"
	# Detection: from the node's last heartbeat to the declaration.
	secs=$(grep -o "job $JOB: node $victim lost: no heartbeat for [0-9.]* s" \
		"$CKPTD_DIR/daemon.log" | awk '{ print $(NF - 1) }')
	echo "# detection with real agents: ${secs} s (lost_after 2 s, heartbeats every 0.25 s)" >&3
	[ "$(gp_field "$JOB" .lost_agents)" = 1 ]
	scancel "$JOB"
	wait "$BG" || true
	BG=
	"$LAB_CMD" restart-node "$victim" >/dev/null
}

@test "a GPU Xid in a node's kernel log is reported as the node's fault; an application's is not" {
	local out=$BATS_TEST_TMPDIR/out nodes first second

	job "$out" -- --steps 2000
	wait_for 60 agents_are "$JOB" 2 || {
		cat "$out"
		false
	}
	nodes=$(scontrol show hostnames "$(squeue -h -j "$JOB" -o %N)")
	first=$(head -n 1 <<<"$nodes") second=$(tail -n 1 <<<"$nodes")
	# /dev/kmsg records: an illegal access (the application's), then a GPU off the bus.
	echo "4,901,1234567,-;NVRM: Xid (PCI:0000:18:00): 13, pid=4242, Graphics SM Warp Exception" \
		>>"$CKPTD_DIR/kmsg-$first"
	echo "3,902,1234568,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4243, GPU has fallen off the bus." \
		>>"$CKPTD_DIR/kmsg-$second"
	wait_for 30 grep -q "job $JOB: .*$second.*Xid 79 on GPU 0000:3b:00" "$CKPTD_DIR/daemon.log"
	wait_for 10 grep -q "$first: Xid 13 on GPU 0000:18:00: .*an application error" "$out"
	grep -q "$second: Xid 79 on GPU 0000:3b:00: pid=4243, GPU has fallen off the bus.: the GPU is broken" "$out"
	! grep -q "job $JOB: .*Xid 13" "$CKPTD_DIR/daemon.log"
	# The policy drops the node (recovery.act is false here: it only says so).
	grep -q "job $JOB: would requeue without $second" "$CKPTD_DIR/daemon.log"
	scancel "$JOB"
	wait "$BG" || true
	BG=
}
