#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Layout-aware restore: a two-stage pipeline (tp=1, pp=2) trained over 4
# nodes of 2 workers with phalanx-launch --elastic loses a node; the
# driver shrinks dp from 4 to 3, and Megatron's rank order renumbers the
# ranks (stage 1 starts at rank 3 instead of 4). Each rank must restore
# its own stage's weights, from a replica of the same stage, and the run
# must end on the bits of an uninterrupted one (tests/faults/
# pipeline_train.py makes the math independent of dp). Restoring by rank
# number, as before, gave new rank 3 old rank 3's stage-0 weights.
#
# lab-nodes: 5

load ../cluster/lib
load ../cluster/driver_jobs

STEPS=120

setup_file()
{
	require_lab || return 1
	need_launch_lab 4 || return 1
	export JOB_NAME=phx-elastic-pp
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_CMD=$BATS_TEST_DIRNAME/../cluster/lab
	export PHALANX_LIBRARY=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export PYTHONPATH=$BATS_TEST_DIRNAME/../../checkpoint/python
	export TRAIN=$BATS_TEST_DIRNAME/pipeline_train.py
	export SCRATCH=$LAB_DIR/elastic-pp.$$
	# The reference: the same job on 4 nodes, never interrupted.
	submit_pipeline ref
	wait_for 300 job_finished "$JOB" || {
		show_job >&2
		return 1
	}
	[ "$(job_state "$JOB")" = COMPLETED ] || {
		echo "phalanx: elastic pipeline: the reference run failed:" >&2
		show_job >&2
		return 1
	}
	export REF_SHA="$(stage_shas)"
	echo "# reference run: job $JOB, $STEPS steps, stage weights $REF_SHA" >&3
}

teardown_file()
{
	scancel --name="$JOB_NAME" 2>/dev/null
	rm -rf "$SCRATCH" "$LAB_DIR"/nodes/node*/tmp/elastic-pp.*
}

teardown()
{
	reset_nodes
}

# submit_pipeline RUN [pipeline_train.py options]: the job on exactly 4
# nodes (no spare) with --elastic, checkpoints every 10 steps in every tier;
# sets JOB and OUT.
submit_pipeline()
{
	local dir=$SCRATCH/$1 conf
	shift
	mkdir -p "$dir"
	conf=$dir/phalanx.yaml
	every_tier_conf "$conf" "$LAB_DIR/nodetmp/$(basename "$SCRATCH").$(basename "$dir")/%n" \
		"$dir/shared" </dev/null
	driver_script --config "$conf" --elastic --nproc-per-node 2 --layout 'pp=2,dp=*' -- \
		/usr/bin/python3 "$TRAIN" --steps "$STEPS" --step-sleep 0.05 "$@" >"$dir/job.sh"
	BATS_TEST_TMPDIR=$dir sbatch_driver 4 "$dir/job.sh"
}

# Each stage's final weights, "stage 0 SHA stage 1 SHA".
stage_shas()
{
	sed -n 's/.*finished [0-9]* steps, \(stage [01]\) final-weights sha256 \([0-9a-f]*\)$/\1 \2/p' \
		"$OUT" | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# The newest step the agents committed (0: none).
committed_step()
{
	sed -n 's/.*checkpoint generation \([0-9]*\) committed in the.*/\1/p' "$OUT" 2>/dev/null |
		sort -n | tail -n 1 | grep . || echo 0
}

committed_at_least()
{
	[ "$(committed_step)" -ge "$1" ]
}

# kill_after_commit: a node other than the driver's dies after a random commit.
kill_after_commit()
{
	local k=$((20 + RANDOM % 40)) node=node$((2 + RANDOM % 3))

	wait_for 240 committed_at_least "$k"
	echo "# $node killed after step $(committed_step) was committed" >&3
	"$LAB_CMD" kill-node "$node" >/dev/null
}

@test "pp=2 with --elastic, a node killed: dp shrinks 4 to 3, each stage restores its own weights, bit for bit" {
	submit_pipeline shrink
	kill_after_commit
	wait_for 400 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" = COMPLETED ]
	has '^driver exit 0$'
	has 'starting the step on 3 node(s) .*layout tp=1,cp=1,ep=1,dp=3,pp=2'
	# Ranks 3-5 are stage 1 now: each read a stage-1 replica (old ranks 4-7).
	for r in 3 4 5; do
		grep -q "\[rank $r\] resumed from generation [0-9]* at step [0-9]*, stage 1, dp $((r - 3)) of 3" "$OUT"
	done
	grep -E "rank 3: generation [0-9]+ from the .*(rank-[4-7]\.shard|partner copy of rank [4-7])" "$OUT"
	echo "final $(stage_shas); reference $REF_SHA"
	[ "$(stage_shas)" = "$REF_SHA" ]
}

@test "the same with dp-sharded saves: the restore is refused with the reason, never another rank's part" {
	submit_pipeline sharded --sharded
	kill_after_commit
	wait_for 400 job_finished "$JOB"
	show_job
	[ "$(job_state "$JOB")" != COMPLETED ]
	has "cannot be restored onto the layout tp=1,cp=1,ep=1,dp=3,pp=2.*sharded across dp (saved with dp=4, this job has dp=3)"
	has 'PhalanxError: .*cannot be restored onto this one'
	# No rank trained again from scratch or from another dp rank's part.
	if has 'dp [0-9] of 3$' || has 'finished [0-9]* steps'; then
		return 1
	fi
}
