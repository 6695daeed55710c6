#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Fake GPUs (character devices declared as gres) are handed out per job.

load lib

setup_file()
{
	require_lab
}

@test "--gres=gpu:2 gives the step two GPUs" {
	run --separate-stderr srun -N1 --gres=gpu:2 \
		sh -c 'echo "$CUDA_VISIBLE_DEVICES;$SLURM_STEP_GPUS"'
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	cvd=${lines[0]%;*}
	step=${lines[0]#*;}
	[ "$(split_sorted "$cvd" | sort -u | wc -l)" -eq 2 ]
	[ "$(split_sorted "$step" | sort -u | wc -l)" -eq 2 ]
	[ -z "$(split_sorted "$step" | grep -vx '[0-7]')" ]
}

@test "two concurrent jobs on one node get disjoint GPUs" {
	dir=$BATS_TEST_TMPDIR/gpus
	mkdir -p "$dir"
	# Each job writes what it got, then waits (bounded) until the other job
	# has written too: both hold their GPUs at the same time.
	job='echo "$CUDA_VISIBLE_DEVICES;$SLURM_STEP_GPUS" >"$1/$SLURM_JOB_ID"
	     n=0
	     while [ "$(ls "$1" | wc -l)" -lt 2 ]; do
		n=$((n + 1)); [ $n -lt 300 ] || exit 3; sleep 0.1
	     done'

	srun -N1 -w node1 --gres=gpu:2 sh -c "$job" sh "$dir" &
	a=$!
	srun -N1 -w node1 --gres=gpu:2 sh -c "$job" sh "$dir" &
	b=$!
	wait "$a"
	wait "$b"

	files=("$dir"/*)
	[ "${#files[@]}" -eq 2 ]
	IFS= read -r one <"${files[0]}"
	IFS= read -r two <"${files[1]}"
	echo "job one: CUDA_VISIBLE_DEVICES;SLURM_STEP_GPUS = $one"
	echo "job two: CUDA_VISIBLE_DEVICES;SLURM_STEP_GPUS = $two"
	# Two GPUs each, as the application sees them and as Slurm assigned them.
	[ "$(split_sorted "${one%;*}" | wc -l)" -eq 2 ]
	[ "$(split_sorted "${two%;*}" | wc -l)" -eq 2 ]
	[ "$(split_sorted "${one#*;}" | wc -l)" -eq 2 ]
	[ "$(split_sorted "${two#*;}" | wc -l)" -eq 2 ]
	# No device is in both jobs.
	[ "$( (split_sorted "${one#*;}"; split_sorted "${two#*;}") | sort -u | wc -l)" -eq 4 ]
}
