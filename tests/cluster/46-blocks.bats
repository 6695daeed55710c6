#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Placement on Slurm's block topology: 4 nodes in 2 blocks (NVLink domains
# or racks) that do not follow the node names, b1 = node[1,3] and
# b2 = node[2,4]. Slurm reads them with topology/block (23.11 and later) or,
# on older Slurm, as one leaf switch per block under a spine (topology/tree);
# the plugin reads the same topology.conf. Which node is in which block is
# taken from Slurm ('scontrol show topology'), the groups from the ranks'
# coordinates in Megatron-Core's order, so the test checks Slurm's view
# against the plan, not the plan against itself.
# lab-blocks: 2

load lib

setup_file()
{
	require_lab
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
}

# One line per task: host tp cp ep dp pp RANK
REPORT='echo "$(hostname) $PHALANX_TP_RANK $PHALANX_CP_RANK $PHALANX_EP_RANK'
REPORT+=' $PHALANX_DP_RANK $PHALANX_PP_RANK $RANK"'

# "host block" per node, from Slurm's base blocks or leaf switches.
slurm_blocks()
{
	local name nodes h

	scontrol show topology | awk '
		/Switches=/ { next }	# a spine: its Nodes= are all nodes
		{
			name = ""; nodes = ""
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^(BlockName|SwitchName)=/)
					name = substr($i, index($i, "=") + 1)
				if ($i ~ /^Nodes=/)
					nodes = substr($i, 7)
			}
			if (name != "" && nodes != "")
				print name, nodes
		}' | while read -r name nodes; do
		for h in $(scontrol show hostnames "$nodes"); do
			echo "$h $name"
		done
	done
}

# groups_in_one_block BLOCKS REPORT KEY-FIELDS: every group of ranks that
# agree on KEY-FIELDS (fields of REPORT, e.g. "3 5 6") lies in one block.
# Prints each group that does not.
groups_in_one_block()
{
	awk -v keys="$3" '
		NR == FNR { block[$1] = $2; next }
		{
			n = split(keys, k, " "); key = ""
			for (i = 1; i <= n; i++) key = key "/" $k[i]
			b = block[$1]
			if (b == "") { print "no block for " $1; bad = 1 }
			if (key in seen && seen[key] != b) {
				print "group " key ": " seen[key] " and " b " (" $1 ")"; bad = 1
			}
			seen[key] = b
		}
		END { exit bad }' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

@test "Slurm reads the lab's blocks: topology/block from 23.11 on, leaf switches before" {
	local plugin blocks
	plugin=$(scontrol show config | awk '$1 == "TopologyPlugin" { print $3 }')
	if slurm_at_least 23.11; then
		[ "$plugin" = topology/block ]
	else
		# topology/block arrived in Slurm 23.11.
		[ "$plugin" = topology/tree ]
	fi
	blocks=$(slurm_blocks | sort)
	echo "$blocks"
	[ "$blocks" = "$(printf 'node1 b1\nnode2 b2\nnode3 b1\nnode4 b2')" ]
}

@test "tensor-parallel groups larger than a node stay inside one block" {
	local blocks
	blocks=$(slurm_blocks)
	run --separate-stderr srun -N4 --ntasks-per-node=4 --gres=gpu:4 \
		--phx-layout=tp=8,dp='*' bash -c "$REPORT"
	show_run
	[ "$status" -eq 0 ]
	[ "$(wc -l <<<"$output")" -eq 16 ]
	# A TP group: the same cp, ep, dp and pp.
	groups_in_one_block "$blocks" "$output" "3 4 5 6"
	# Slurm's own order puts ranks 0-7 on node1 and node2, two blocks: the
	# check above is one a block-blind placement fails.
	run --separate-stderr srun -N4 --ntasks-per-node=4 --gres=gpu:4 \
		--phx-layout=tp=8,dp='*' --phx-place=block bash -c "$REPORT"
	[ "$status" -eq 0 ]
	! groups_in_one_block "$blocks" "$output" "3 4 5 6"
}

@test "an MoE layout keeps each expert block (tp x ep) inside one block and TP inside a node" {
	local blocks
	blocks=$(slurm_blocks)
	run --separate-stderr srun -N4 --ntasks-per-node=8 --gres=gpu:8 \
		--phx-layout=tp=4,ep=4,dp='*' bash -c "$REPORT"
	show_run
	[ "$status" -eq 0 ]
	[ "$(wc -l <<<"$output")" -eq 32 ]
	# An expert-parallel group: the same tp, cp, dp and pp.
	groups_in_one_block "$blocks" "$output" "2 3 5 6"
	# An expert block: the same cp, dp and pp.
	groups_in_one_block "$blocks" "$output" "3 5 6"
	# A TP group shares one node.
	[ "$(awk '{ print $3 "/" $4 "/" $5 "/" $6, $1 }' <<<"$output" | sort -u | wc -l)" -eq 8 ]
	run --separate-stderr srun -N4 --ntasks-per-node=8 --gres=gpu:8 \
		--phx-layout=tp=4,ep=4,dp='*' --phx-place=block bash -c "$REPORT"
	[ "$status" -eq 0 ]
	! groups_in_one_block "$blocks" "$output" "3 5 6"
}
