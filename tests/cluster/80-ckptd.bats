#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-ckptd on the host side of the lab, agents in the lab's nodes:
# simulated agents (tests/bench/ckpt_sim, one per node, with the job token
# the plugin minted) commit generations over the lab network; the daemon
# is killed in the middle of a commit and started again; one job cannot
# act on another's generations.

load lib

setup_file()
{
	require_lab
	lab_has_plugin || skip "the lab was brought up with --no-plugin (no job tokens)"
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export CKPTD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/phx-ckptd-lab.XXXXXX")
	chmod 0755 "$CKPTD_DIR"
	mkdir -p "$CKPTD_DIR/shards"
	export CKPTD_ADDR=10.77.${PHX_LAB_ID:-0}.1:$((17700 + 10 * ${PHX_LAB_ID:-0}))
	export CKPTD_METRICS=127.0.0.1:$((17701 + 10 * ${PHX_LAB_ID:-0}))
	export SIM=$PHX_BUILD_DIR/tests/bench/ckpt_sim
	export PHX=$PHX_BUILD_DIR/cli/phalanx
	start_daemon
	# One allocation of four nodes; every phase is a step of it, so the job
	# id (and with it the token) stays the same.
	JOB_A=$(sbatch --parsable -N4 -o /dev/null --wrap 'sleep 600')
	JOB_B=$(sbatch --parsable -N1 -o /dev/null --wrap 'sleep 600')
	export JOB_A JOB_B
	wait_for 60 job_running "$JOB_A"
	wait_for 60 job_running "$JOB_B"
}

teardown_file()
{
	scancel "${JOB_A:-0}" "${JOB_B:-0}" 2>/dev/null
	stop_daemon
	[ -n "${CKPTD_DIR:-}" ] && rm -rf "$CKPTD_DIR"
}

start_daemon()
{
	# The lab's munged vouches for admins on the TCP port (other hosts).
	printf 'ckptd:\n  munge_socket: %s\n' "$LAB_DIR/munge/munge.socket" >"$CKPTD_DIR/daemon.yaml"
	start_ckptd --keep 3 --config "$CKPTD_DIR/daemon.yaml"
}

stop_daemon()
{
	local pid

	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null
	wait_for 10 bash -c "! kill -0 $pid 2>/dev/null"
	rm -f "$CKPTD_DIR/pid"
}

# sim JOB NODES ARGS...: one simulated agent per node of a step of JOB.
sim()
{
	local job=$1 nodes=$2
	shift 2
	srun --jobid="$job" --overlap -N"$nodes" --ntasks-per-node=1 bash -c \
		'exec "$0" run --address "$1" --token "$PHALANX_JOB_TOKEN" --job "$SLURM_JOB_ID" \
			--uid "$(id -u)" --nodes 1 --first-node "$SLURM_NODEID" --job-nodes 4 \
			--ranks-per-node 2 --timeout 30 "${@:2}"' \
		"$SIM" "$CKPTD_ADDR" "$@"
}

# Every one of the four nodes' agents printed generation GEN committed.
all_committed()
{
	[ "$(grep -c "^committed $1 " "$2")" -eq 4 ]
}

# nobody_job NODE DIR GENS: a job of user nobody on NODE (its id in job) whose
# simulated agent commits GENS generations of 2 ranks, shards in DIR (made
# for nobody). Sets as_nobody.
nobody_job()
{
	as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
	mkdir -p "$2"
	chown nobody "$2"
	job=$("${as_nobody[@]}" env -C / sbatch --parsable -N1 -w "$1" -o /dev/null --wrap 'sleep 600')
	[[ $job =~ ^[0-9]+$ ]] || return 1
	wait_for 60 job_running "$job" || return 1
	run --separate-stderr "${as_nobody[@]}" env -C / srun --jobid="$job" --overlap -N1 bash -c \
		'exec "$0" run --address "$1" --token "$PHALANX_JOB_TOKEN" --job "$SLURM_JOB_ID" \
			--uid "$(id -u)" --nodes 1 --first-node 0 --job-nodes 1 --ranks-per-node 2 \
			--timeout 30 --gens "$3" --shard-dir "$2"' "$SIM" "$CKPTD_ADDR" "$2" "$3"
	show_run
	[ "$status" -eq 0 ]
}

ckpt()
{
	"$PHX" ckpt "$@" --socket "$CKPTD_DIR/ckptd.sock"
}

@test "a job's agents in the nodes commit generations with the plugin's token" {
	run --separate-stderr sim "$JOB_A" 4 --gens 3 --shard-dir "$CKPTD_DIR/shards"
	show_run
	[ "$status" -eq 0 ]
	# Every node's agent saw every commit.
	[ "$(grep -c '^committed 3 300' <<<"$output")" -eq 4 ]
	run --separate-stderr ckpt ls --job "$JOB_A"
	show_run
	[ "$status" -eq 0 ]
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "1 2 3" ]
	# The shards are real files with real digests: verify reads them all.
	run --separate-stderr ckpt verify "$JOB_A"
	show_run
	[ "$status" -eq 0 ]
	grep -q "generation 3 (step 300, 8 ranks): 8 verified, 0 corrupt" <<<"$output"
	run --separate-stderr curl -sf "http://$CKPTD_METRICS/metrics"
	[ "$status" -eq 0 ]
	grep -q '^phalanx_ckptd_commits_total 3$' <<<"$output"
	# Per job, and all of it as Prometheus's own checker wants it.
	grep -q "^phalanx_ckptd_job_last_commit_step{job=\"$JOB_A\"} 300$" <<<"$output"
	"${PHX_PROMTOOL:?tests/quickstart fetches promtool}" check metrics <<<"$output"
}

@test "a corrupt shard fails phalanx ckpt verify, naming the rank" {
	cp "$CKPTD_DIR/shards/$JOB_A-2-5" "$CKPTD_DIR/rank5.bak"
	printf 'X' | dd of="$CKPTD_DIR/shards/$JOB_A-2-5" bs=1 seek=100 conv=notrunc 2>/dev/null
	run --separate-stderr ckpt verify "$JOB_A" 2
	mv "$CKPTD_DIR/rank5.bak" "$CKPTD_DIR/shards/$JOB_A-2-5"
	show_run
	[ "$status" -eq 1 ]
	grep -q "rank 5: shared copy .* does not match its sha256 digest" <<<"$stderr"
	grep -q "7 verified, 1 corrupt" <<<"$output"
}

@test "killed mid-commit and restarted, the daemon loses no commit and publishes no partial generation" {
	ckpt ls --json >"$CKPTD_DIR/before.json"
	# Generation 4 prepared by two nodes of four, then the daemon dies.
	run --separate-stderr sim "$JOB_A" 2 --first-gen 4 --no-wait
	show_run
	[ "$status" -eq 0 ]
	run --separate-stderr "$PHX" status --json --socket "$CKPTD_DIR/ckptd.sock"
	show_run
	grep -A2 '"open"' <<<"$output" | grep -q '4'
	kill -9 "$(cat "$CKPTD_DIR/pid")"
	wait_for 10 bash -c "! kill -0 $(cat "$CKPTD_DIR/pid") 2>/dev/null"
	start_daemon
	ckpt ls --json >"$CKPTD_DIR/after.json"
	cmp "$CKPTD_DIR/before.json" "$CKPTD_DIR/after.json"
	# The other two nodes prepare generation 4 now: the first two's prepares
	# died with the daemon and their agents are gone, so it stays unpublished.
	run --separate-stderr srun --jobid="$JOB_A" --overlap -N4 --ntasks-per-node=1 bash -c \
		'[ "$SLURM_NODEID" -lt 2 ] && exit 0; exec "$0" run --address "$1" \
			--token "$PHALANX_JOB_TOKEN" --job "$SLURM_JOB_ID" --uid "$(id -u)" --nodes 1 \
			--first-node "$SLURM_NODEID" --job-nodes 4 --ranks-per-node 2 --first-gen 4 \
			--no-wait' "$SIM" "$CKPTD_ADDR"
	show_run
	[ "$status" -eq 0 ]
	run --separate-stderr ckpt ls --job "$JOB_A"
	show_run
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "1 2 3" ]
	# A whole generation from all four commits, and generation 4 gives way.
	run --separate-stderr sim "$JOB_A" 4 --first-gen 5
	show_run
	[ "$status" -eq 0 ]
	[ "$(grep -c '^committed 5 500' <<<"$output")" -eq 4 ]
	run --separate-stderr ckpt ls --job "$JOB_A"
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "2 3 5" ]
	grep -q "generation 4 aborted: a newer generation committed" "$CKPTD_DIR/daemon.log"
}

@test "an agent with another job's token is refused and changes nothing" {
	# Job B's agent claims job A with job B's token.
	run --separate-stderr srun --jobid="$JOB_B" --overlap -N1 bash -c \
		'exec "$0" run --address "$1" --token "$PHALANX_JOB_TOKEN" --job "$2" \
			--uid "$(id -u)" --nodes 1 --job-nodes 4 --ranks-per-node 2 --first-gen 9 \
			--timeout 5' "$SIM" "$CKPTD_ADDR" "$JOB_A"
	show_run
	[ "$status" -ne 0 ]
	grep -q "^refused the answer does not prove the token of job $JOB_A" <<<"$output"
	run --separate-stderr ckpt ls --job "$JOB_A"
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "2 3 5" ]
	grep -q "phalanx_ckptd_auth_failures_total [1-9]" <<<"$(curl -sf "http://$CKPTD_METRICS/metrics")"
	# With its own token, job B's agent reads job B's (empty) catalog, not job A's.
	run --separate-stderr srun --jobid="$JOB_B" --overlap -N1 bash -c \
		'exec "$0" query --address "$1" --token "$PHALANX_JOB_TOKEN" --job "$SLURM_JOB_ID" \
			--uid "$(id -u)" --job-nodes 1 --ranks-per-node 2 --timeout 5' "$SIM" "$CKPTD_ADDR"
	show_run
	[ "$status" -eq 0 ]
	[ "$output" = "manifest 0 step 0 world 0" ]
}

@test "another user can neither list, read nor remove a job's generations" {
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
	run --separate-stderr "${as_nobody[@]}" "$PHX" ckpt ls --socket "$CKPTD_DIR/ckptd.sock"
	show_run
	[ "$status" -eq 0 ]
	! grep -q "^$JOB_A " <<<"$output"
	for cmd in "ls --job $JOB_A" "verify $JOB_A" "rm $JOB_A 5"; do
		# shellcheck disable=SC2086
		run --separate-stderr "${as_nobody[@]}" "$PHX" ckpt $cmd --socket "$CKPTD_DIR/ckptd.sock"
		show_run
		[ "$status" -eq 1 ]
		grep -q "no job $JOB_A of uid $(id -u nobody)" <<<"$stderr"
	done
	# root may; the generation is gone from the catalog for good.
	run --separate-stderr ckpt rm "$JOB_A" 2
	[ "$status" -eq 0 ]
	stop_daemon
	start_daemon
	run --separate-stderr ckpt ls --job "$JOB_A"
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "3 5" ]
}

@test "agents ride through a daemon restart: nothing aborts, every generation commits" {
	# The agents hold after generation 30 until the daemon is gone, so the
	# restart lands in the middle of their run however fast they are.
	sim "$JOB_A" 4 --first-gen 10 --gens 300 --hold-after 30 --hold-file "$CKPTD_DIR/killed" \
		>"$CKPTD_DIR/ride.out" 2>"$CKPTD_DIR/ride.err" &
	local agents=$! rc=0
	wait_for 60 all_committed 30 "$CKPTD_DIR/ride.out"
	kill -9 "$(cat "$CKPTD_DIR/pid")"
	touch "$CKPTD_DIR/killed"
	start_daemon
	wait "$agents" || rc=$?
	cat "$CKPTD_DIR/ride.err"
	[ "$rc" -eq 0 ]
	# All four nodes' agents saw all 300 commits, across the restart.
	[ "$(grep -c '^committed ' "$CKPTD_DIR/ride.out")" -eq 1200 ]
	! grep -q '^aborted' "$CKPTD_DIR/ride.out"
	grep -q 'saves continue on the node and are reported' "$CKPTD_DIR/ride.err"
	run --separate-stderr ckpt ls --job "$JOB_A"
	[ "$(awk -v j="$JOB_A" '$1 == j { print $2 }' <<<"$output" | xargs)" = "307 308 309" ]
}

# A user's job commits a generation with real shards; then the user puts a
# FIFO and a link to a file only root may read where two of its shards
# were. root's verify must neither hang on the FIFO nor say anything about
# the secret file: it reads the shards as the job's owner, and only
# regular files, never through a link.
@test "root's phalanx ckpt verify reads a user's shards as that user: a FIFO or a link there is refused, not opened" {
	local dir=$CKPTD_DIR/nobody job secret=$CKPTD_DIR/secret
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	head -c 12345 /dev/urandom >"$secret"
	chmod 0600 "$secret"
	nobody_job node1 "$dir" 1
	# The user's own view first: the generation verifies.
	run --separate-stderr "${as_nobody[@]}" "$PHX" ckpt verify "$job" --socket "$CKPTD_DIR/ckptd.sock"
	show_run
	[ "$status" -eq 0 ]
	grep -q '2 ranks): 2 verified' <<<"$output"
	"${as_nobody[@]}" rm -f "$dir/$job-1-0" "$dir/$job-1-1"
	"${as_nobody[@]}" mkfifo "$dir/$job-1-0"
	"${as_nobody[@]}" ln -s "$secret" "$dir/$job-1-1"
	run --separate-stderr timeout 30 "$PHX" ckpt verify "$job" --socket "$CKPTD_DIR/ckptd.sock"
	scancel "$job"
	show_run
	# Finished (no FIFO held it), both refused, nothing of the secret file said.
	[ "$status" -eq 1 ]
	grep -q "rank 0: .* copy is not readable here: .*$job-1-0 is not a regular file" <<<"$stderr"
	grep -q "rank 1: .* copy is not readable here: .*$job-1-1 is not a regular file" <<<"$stderr"
	! grep -q 12345 <<<"$stderr$output"
	grep -q '2 ranks): 0 verified, 0 corrupt, 2 not readable here' <<<"$output"
}

@test "on a node of the job, its owner's phalanx status, goodput and ckpt ls reach the daemon over TCP with MUNGE; another user sees none of it" {
	local dir=$CKPTD_DIR/remote job login=$CKPTD_DIR/login.yaml other
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	other=$(getent passwd daemon | cut -d: -f3)
	[ -n "$other" ] || skip "no user 'daemon'"
	# A login node's phalanx.yaml: no daemon socket there, the daemon's address.
	printf 'ckptd:\n  socket: %s\n  address: "%s"\n  munge_socket: %s\n' \
		"$CKPTD_DIR/absent.sock" "$CKPTD_ADDR" "$LAB_DIR/munge/munge.socket" >"$login"
	chmod 0644 "$login"
	nobody_job node2 "$dir" 2
	# On node2, in the job's own network namespace, as its owner: over TCP.
	run --separate-stderr "${as_nobody[@]}" env -C / srun --jobid="$job" --overlap -N1 bash -c \
		'"$0" status --json --config "$1" >"$2/status" &&
		 "$0" goodput "$SLURM_JOB_ID" --config "$1" >"$2/goodput" &&
		 "$0" ckpt ls --job "$SLURM_JOB_ID" --config "$1" >"$2/ls"' "$PHX" "$login" "$dir"
	scancel "$job"
	show_run
	[ "$status" -eq 0 ]
	[ "$(jq -c "[.jobs[] | select(.job == $job) | .uid]" "$dir/status")" = "[$(id -u nobody)]" ]
	grep -q "^job $job: .*goodput" "$dir/goodput"
	[ "$(awk -v j="$job" '$1 == j { print $2 }' "$dir/ls" | xargs)" = "1 2" ]
	grep -q "admin connection from uid $(id -u nobody) at 10\.77\." "$CKPTD_DIR/daemon.log"
	# Another user, from anywhere: not told the job exists.
	run --separate-stderr setpriv --reuid="$other" --regid="$other" --clear-groups \
		"$PHX" goodput "$job" --server "$CKPTD_ADDR" --config "$login"
	show_run
	[ "$status" -eq 1 ]
	grep -q "no job $job of uid $other" <<<"$stderr"
	run --separate-stderr setpriv --reuid="$other" --regid="$other" --clear-groups \
		"$PHX" status --json --server "$CKPTD_ADDR" --config "$login"
	[ "$status" -eq 0 ]
	[ "$(jq '.jobs | length' <<<"$output")" -eq 0 ]
	# SlurmUser and root see every job.
	run --separate-stderr "$PHX" ckpt ls --server "$CKPTD_ADDR" --config "$login"
	[ "$status" -eq 0 ]
	[ "$(awk -v j="$job" '$1 == j { print $2 }' <<<"$output" | xargs)" = "1 2" ]
}

@test "attack: a process at the daemon's address without the cluster key is not trusted" {
	local imp=${CKPTD_ADDR%:*}:$((17709 + 10 * ${PHX_LAB_ID:-0})) pid counts

	/usr/bin/python3 "$BATS_TEST_DIRNAME/../security/impostor_daemon.py" "$imp" 10 \
		>"$CKPTD_DIR/impostor.out" &
	pid=$!
	wait_for 10 grep -q '^listening' "$CKPTD_DIR/impostor.out"
	run --separate-stderr srun --jobid="$JOB_A" --overlap -N1 bash -c \
		'exec "$0" run --address "$1" --token "$PHALANX_JOB_TOKEN" --job "$SLURM_JOB_ID" \
			--uid "$(id -u)" --nodes 1 --job-nodes 4 --ranks-per-node 2 --first-gen 20 \
			--gens 1 --timeout 4' "$SIM" "$imp"
	show_run
	wait "$pid"
	counts=$(tail -n 1 "$CKPTD_DIR/impostor.out")
	echo "# impostor: $counts" >&3
	# Before: the agent registered, sent its prepare (its shards' paths and
	# digests) and took the impostor's commit ("registers 1 prepares 1").
	# Now it asks for the proof every time, gets none, and goes no further.
	! grep -q '^committed' <<<"$output"
	grep -q 'carries no proof that it holds the cluster key' <<<"$stderr"
	[[ "$counts" =~ auths\ ([0-9]+)\ nonces\ ([0-9]+)\ registers\ 0\ prepares\ 0$ ]]
	[ "${BASH_REMATCH[1]}" -ge 1 ]
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
}
