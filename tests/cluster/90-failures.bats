#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Node failures made with the lab: a dead node and a network partition.
# Last in the suite; each test leaves the cluster whole again.

load lib

setup_file()
{
	require_lab
}

teardown_file()
{
	# Whatever failed above, give the next user a whole cluster.
	require_lab 2>/dev/null || return 0
	node_idle node3 || "$LAB_CMD" restart-node node3 || true
	node_idle node4 || "$LAB_CMD" heal-node node4 || true
}

@test "kill-node: node3 goes DOWN, restart-node brings it back idle" {
	wait_for 30 node_idle node3
	"$LAB_CMD" kill-node node3
	[ -z "$(ip netns pids "$(lab_netns 3)")" ]
	wait_for 60 node_down node3

	"$LAB_CMD" restart-node node3
	node_idle node3
	run --separate-stderr srun -N1 -w node3 hostname
	show_run
	[ "$status" -eq 0 ]
	[ "$output" = node3 ]
}

@test "cut-node: node4 stops responding, heal-node brings it back idle" {
	wait_for 30 node_idle node4
	"$LAB_CMD" cut-node node4
	wait_for 60 node_not_responding node4
	# Cut off, not dead: its slurmd still runs.
	[ -n "$(ip netns pids "$(lab_netns 4)")" ]

	"$LAB_CMD" heal-node node4
	node_idle node4
	run --separate-stderr srun -N1 -w node4 hostname
	show_run
	[ "$status" -eq 0 ]
	[ "$output" = node4 ]
}
