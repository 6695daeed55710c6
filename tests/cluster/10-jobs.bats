#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Plain Slurm jobs on the lab: every node is a separate host.

load lib

setup_file()
{
	require_lab
}

@test "srun -N4 hostname runs once on each of node1..node4" {
	run --separate-stderr srun -N4 hostname
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	[ "$(printf '%s\n' "${lines[@]}" | sort | tr '\n' ' ')" = "node1 node2 node3 node4 " ]
}

@test "each node resolves its own name to its own address" {
	run --separate-stderr srun -N4 sh -c 'echo "$(hostname) $(getent hosts "$(hostname)")"'
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	for i in 1 2 3 4; do
		printf '%s\n' "${lines[@]}" | grep -Eq "^node$i 10\.77\.${PHX_LAB_ID:-0}\.1$i +node$i\$"
	done
}

@test "each node has its own node-local TmpFS" {
	tmpfs=$(scontrol show config | awk '$1 == "TmpFS" { print $3 }')
	[ -d "$tmpfs" ]

	run --separate-stderr srun -N4 sh -c \
		'touch "$1/mark-$(hostname)" && ls "$1" | grep "^mark-" && rm "$1/mark-$(hostname)"' \
		sh "$tmpfs"
	show_run
	[ "$status" -eq 0 ]
	# Each node sees its own mark and none of the others'.
	[ "$(printf '%s\n' "${lines[@]}" | sort | tr '\n' ' ')" = \
	  "mark-node1 mark-node2 mark-node3 mark-node4 " ]
}

@test "sbatch -N2 with an inner srun runs to COMPLETED with the right output" {
	out=$BATS_TEST_TMPDIR/job.out

	run --separate-stderr sbatch --parsable -N2 -o "$out" \
		--wrap 'echo "nodelist=$SLURM_JOB_NODELIST"; srun hostname | sort'
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	[[ $job =~ ^[0-9]+$ ]]

	wait_for 60 job_finished "$job"
	scontrol show job "$job"
	cat "$out"
	[ "$(job_state "$job")" = COMPLETED ]
	[ "$(job_field "$job" ExitCode)" = 0:0 ]

	nodelist=$(job_field "$job" NodeList)
	expect=$(scontrol show hostnames "$nodelist" | sort)
	[ "$(echo "$expect" | wc -l)" -eq 2 ]
	[ "$(head -n 1 "$out")" = "nodelist=$nodelist" ]
	[ "$(tail -n +2 "$out")" = "$expect" ]
}
