# SPDX-License-Identifier: Apache-2.0
#
# The fault suite's shared part, loaded after tests/cluster/lib.bash and
# driver_jobs.bash: phalanx-ckptd on the host side of the lab, the training
# job (phalanx-launch driver in a batch script, 4 nodes of 2 workers and a
# spare, tests/demo/train.py saving through Phalanx), its uninterrupted
# reference run, and the checks every fault test makes.

# Steps of every run; a fault lands at a random commit in the first half.
STEPS=300

faults_setup_file()
{
	local ref

	require_lab || return 1
	lab_has_plugin || {
		echo "phalanx: fault tests: the lab runs without the plugin (no job tokens for" \
		     "phalanx-ckptd); bring it up without --no-plugin" >&2
		return 1
	}
	need_launch_lab 7 || return 1
	export STEPS
	export PHALANX_LIBRARY=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PYTHONPATH=$BATS_TEST_DIRNAME/../../checkpoint/python
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	export JOB_NAME=phx-faults
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	# act: false: the job's driver recovers; the daemon keeps the ledger
	# and the catalog, and leaves the lab's nodes alone.
	ckptd_env phx-faults 17706 false
	start_daemon
	# The reference: the same job, uninterrupted.
	submit_train ref
	wait_for 300 job_finished "$JOB" || {
		show_job >&2
		return 1
	}
	ref=$(final_sha)
	[ "$(job_state "$JOB")" = COMPLETED ] && [ -n "$ref" ] || {
		echo "phalanx: fault tests: the reference run failed:" >&2
		show_job >&2
		return 1
	}
	export REF_SHA=$ref
	echo "# reference run: job $JOB, $STEPS steps, final weights sha256 $ref" >&3
}

faults_teardown_file()
{
	local pid

	scancel --name="$JOB_NAME" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	[ -n "${CKPTD_DIR:-}" ] || return 0
	rm -rf "$LAB_DIR"/nodes/node*/tmp/phx-faults.* "$CKPTD_DIR"
}

start_daemon()
{
	start_ckptd -c "$CKPTD_DIR/daemon.yaml"
}

# submit_train RUN [phalanx-launch options]: the training job on 4 nodes and
# a spare, its checkpoints in RUN's own directories; sets JOB, OUT, RUN, CONF.
submit_train()
{
	local dir=$CKPTD_DIR/$1

	RUN=$(run_name "$1")
	shift
	mkdir -p "$dir"
	CONF=$dir/phalanx.yaml
	# Every tier every time: the spare restores the newest generation from
	# the shared one (the lab's nodes share this file system).
	every_tier_conf "$CONF" "$LAB_DIR/nodetmp/$RUN/%n" "$dir/shared" <<-YAML
		ckptd:
		  address: "$CKPTD_ADDR"
	YAML
	driver_script --config "$CONF" --spares 1 --nproc-per-node 2 "$@" -- \
		/usr/bin/python3 "$TRAIN" --phalanx --weights-digest --steps "$STEPS" \
		--step-sleep 0.02 >"$dir/job.sh"
	BATS_TEST_TMPDIR=$dir sbatch_driver 5 "$dir/job.sh"
}

# The name of RUN's directories: unique to this file's run of the suite.
run_name()
{
	echo "$(basename "$CKPTD_DIR").$1"
}

# Node I's local tier of this run, seen from the host.
local_tier()
{
	echo "$LAB_DIR/nodes/node$1/tmp/$RUN/node$1"
}

# The newest step phalanx-ckptd saw committed for the job (0: none).
committed_step()
{
	sed -n "s/.*job $JOB: generation [0-9]* (step \([0-9]*\)) committed$/\1/p" \
		"$CKPTD_DIR/daemon.log" | sort -n | tail -n 1 | grep . || echo 0
}

committed_at_least()
{
	[ "$(committed_step)" -ge "$1" ]
}

# at_random_step: waits for the job's first commit at or after a random
# step, then a random part of a save interval more; sets FAULT_STEP to the
# newest committed step just before the fault (printed: a failure names
# where its fault landed).
at_random_step()
{
	local k=$((30 + RANDOM % 120))

	echo "# fault after step $k" >&3
	wait_for 180 committed_at_least "$k" || return 1
	sleep "0.$((RANDOM % 10))"
	FAULT_STEP=$(committed_step)
	FAULT_T=$(date +%s.%N)
}

# A random node of the step (not node1: the driver runs there).
random_node()
{
	echo "node$((2 + RANDOM % 3))"
}

final_sha()
{
	sed -n 's/.*final-weights sha256 \([0-9a-f]*\)$/\1/p' "$OUT" | tail -n 1
}

resumed()
{
	grep -q 'resumed from generation [0-9]* at step' "$OUT"
}

# Seconds since the fault until the workers resumed training (a figure to
# print, never asserted); call right after the fault.
time_to_resume()
{
	wait_for 240 resumed || return 1
	RESUME_S=$(echo "$(date +%s.%N) - $FAULT_T" | bc)
}

# The checks of every fault test, after the fault: the job completes, ends
# on the reference's bits, resumed from the newest generation committed
# before the fault (or a newer one), and its goodput parts add up to its
# wall time. Prints the recovery figures.
check_recovered()
{
	local sha steps s gp sum wall elapsed

	wait_for 300 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	has '^driver exit 0$'
	grep -q "finished $STEPS steps.*replicas identical: True" "$OUT"
	sha=$(final_sha)
	echo "final weights sha256 $sha, reference $REF_SHA"
	[ "$sha" = "$REF_SHA" ]
	# No committed generation lost: every rank resumed, each time from a
	# step the agents committed and not older than the newest commit the
	# daemon knew of at the fault. NO_RESTORE=1: a fault that stops no
	# worker, so nothing resumes.
	steps=$(sed -n 's/.*resumed from generation [0-9]* at step \([0-9]*\)$/\1/p' "$OUT")
	echo "committed before the fault: step $FAULT_STEP; resumed at: $(echo $steps)"
	if [ "${NO_RESTORE:-0}" = 1 ]; then
		[ -z "$steps" ]
	else
		[ "$(wc -w <<<"$steps")" -ge 8 ]
	fi
	for s in $steps; do
		[ "$s" -ge "$FAULT_STEP" ]
		grep -q "checkpoint generation $s committed in the" "$OUT"
	done
	# The ledger closes when the daemon sees the job end in Slurm.
	wait_for 30 gp_done
	gp=$("$PHX" goodput "$JOB" --json --socket "$SOCK")
	echo "$gp"
	sum=$(jq '[.parts[]] | add' <<<"$gp")
	wall=$(jq .wall <<<"$gp")
	# The parts are kept apart from the ledger's two ends; a daemon that
	# restarted replays them from its journal in microseconds: 7 parts
	# round by at most 3.5 us. 1 ms is far above that and far below any
	# second that went unaccounted.
	[ "$(echo "d = $sum - $wall; d < 0.001 && d > -0.001" | bc -l)" = 1 ]
	elapsed=$(($(date -d "$(job_field "$JOB" EndTime)" +%s) - \
		$(date -d "$(job_field "$JOB" StartTime)" +%s)))
	if [ -n "$steps" ]; then
		printf '# recovery: fault at committed step %s, resumed at step %s, fault to training again %.2f s;' \
			"$FAULT_STEP" "$(echo $steps | tr ' ' '\n' | sort -n | head -n 1)" "${RESUME_S:-0}" >&3
	else
		printf '# recovery: fault at committed step %s, no restore needed;' "$FAULT_STEP" >&3
	fi
	jq -r 'def s: . * 100 | round / 100 | tostring + " s";
		" ledger: detection \(.parts.detection | s) (last \(.detect_last | s)), restart \(.parts.restart | s), lost work \(.parts.lost_work | s), queue \(.parts.queue | s); failures \(.failures), in-job restarts \(.restarts), lost agents \(.lost_agents), requeues \(.requeues)"' \
		<<<"$gp" >&3
	printf '# goodput: wall %.2f s (Slurm elapsed %s s), parts sum %.2f s, goodput %.1f%%\n' \
		"$wall" "$elapsed" "$sum" "$(jq '.goodput * 100' <<<"$gp")" >&3
}

gp_done()
{
	[ "$("$PHX" goodput "$JOB" --json --socket "$SOCK" 2>/dev/null | jq -r .phase)" = done ]
}

# PIDs of node I's training workers.
workers_of()
{
	ip netns pids "$(lab_netns "$1")" | xargs -r ps -o pid=,args= -p |
		awk -v t="$TRAIN" '$2 == "/usr/bin/python3" && $3 == t { print $1 }'
}
