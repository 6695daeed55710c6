#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# PMIx wire-up across nodes: put, collecting fence, get from the neighbour.

load lib

setup_file()
{
	require_lab
	[ -x "$PHX_BUILD_DIR/tests/cluster/pmix_exchange" ] || {
		echo "phalanx: cluster tests: $PHX_BUILD_DIR/tests/cluster/pmix_exchange" \
		     "is not built; run 'make check' there" >&2
		return 1
	}
}

@test "srun --mpi=pmix: 4 nodes x 2 ranks, each rank reads its neighbour's value" {
	local -A host value
	local line r peer cross=0

	run --separate-stderr srun --mpi=pmix -N4 --ntasks-per-node=2 \
		"$PHX_BUILD_DIR/tests/cluster/pmix_exchange"
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 8 ]

	# rank=R size=S host=H peer=P value=hello-from-rank-P@HOST
	for line in "${lines[@]}"; do
		[[ $line =~ ^rank=([0-9]+)\ size=8\ host=(node[1-4])\ peer=([0-9]+)\ value=(.*)$ ]]
		r=${BASH_REMATCH[1]}
		[ -z "${host[$r]:-}" ]
		[ "${BASH_REMATCH[3]}" -eq $(((r + 1) % 8)) ]
		host[$r]=${BASH_REMATCH[2]}
		value[$r]=${BASH_REMATCH[4]}
	done
	[ "${#host[@]}" -eq 8 ]

	# Every value names the neighbour and the node that neighbour ran on.
	for ((r = 0; r < 8; r++)); do
		peer=$(((r + 1) % 8))
		[ "${value[$r]}" = "hello-from-rank-$peer@${host[$peer]}" ]
		[ "${host[$r]}" = "${host[$peer]}" ] || cross=$((cross + 1))
	done
	[ "$cross" -ge 4 ]

	# Two ranks on each of the four nodes.
	[ "$(printf '%s\n' "${host[@]}" | sort | uniq -c | awk '{ print $1 }' | sort -u)" = 2 ]
	[ "$(printf '%s\n' "${host[@]}" | sort -u | wc -l)" -eq 4 ]
}
