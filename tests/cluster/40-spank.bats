#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# The Phalanx SPANK plugin is loaded through the lab's plugstack.conf.

load lib

setup_file()
{
	require_lab
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
}

@test "srun --help lists the plugin's options" {
	run --separate-stderr srun --help
	show_run
	[ "$status" -eq 0 ]
	for opt in --phx-layout= --phx-place= --phx-isolate= --phx-explain; do
		grep -qe "^ *$opt" <<<"$output"
	done
}

@test "srun --phx-place=bogus is refused with a phalanx: error" {
	run --separate-stderr srun -N1 --phx-place=bogus true
	show_run
	[ "$status" -ne 0 ]
	grep -q 'phalanx: .*bogus' <<<"$stderr"
}

@test "sbatch --phx-place=block is accepted and the job completes" {
	run --separate-stderr sbatch --parsable -N1 --phx-place=block -o /dev/null --wrap true
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	[[ $job =~ ^[0-9]+$ ]]
	wait_for 60 job_finished "$job"
	[ "$(job_state "$job")" = COMPLETED ]
}

@test "make install puts the plugin in the PluginDir this Slurm loads plugins from" {
	local spankdir plugindir
	# configure's default; LIBDIR/slurm (unexpanded) when it found no PluginDir.
	spankdir=$(sed -n 's/^spankdir = //p' "$PHX_BUILD_DIR/Makefile")
	run scontrol show config
	show_run
	[ "$status" -eq 0 ]
	plugindir=$(awk '$1 == "PluginDir" { print $3 }' <<<"$output")
	echo "configure: $spankdir; Slurm: $plugindir"
	[ -n "$plugindir" ]
	[ "$(readlink -f "$spankdir")" = "$(readlink -f "$plugindir")" ]
}
