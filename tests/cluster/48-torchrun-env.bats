#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# The torchrun environment, variable by variable, against torchrun itself:
# the same job shape (2 nodes x 2 ranks) started by PyTorch's torchrun
# (static rendezvous, node rank = SLURM_NODEID), by the plugin on a plain
# srun with --phx-place=block, and by phalanx-launch's agents; for every
# rank, the variables torchrun defines must have torchrun's values (or the
# difference phalanx(7), THE TORCHRUN ENVIRONMENT, documents).

load lib

setup_file()
{
	require_lab
	need_launch_lab 2 || return 1
	export TORCHRUN=$BATS_TEST_DIRNAME/../torchrun.py
	export JOB_NAME=phx-torchrun-env SLURM_JOB_NAME=phx-torchrun-env
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
}

VARS='RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME'
VARS+=' ROLE_RANK ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RESTART_COUNT'
VARS+=' TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE'
VARS+=' TORCHELASTIC_ERROR_FILE TORCH_NCCL_ASYNC_ERROR_HANDLING'
# One line per rank: the host, then NAME=VALUE for each of VARS (- unset),
# written at once (the workers of a node share torchrun's standard output).
PRINT='l=$(hostname); for v in '"$VARS"'; do l+=" $v=${!v--}"; done; echo "$l"'

# value LINES HOST LOCAL_RANK NAME: NAME on the rank of LOCAL_RANK on HOST.
value()
{
	awk -v h="$2" -v l="LOCAL_RANK=$3" '$1 == h && index(" " $0 " ", " " l " ")' <<<"$1" |
		tr ' ' '\n' | sed -n "s/^$4=//p"
}

torchrun_lines()
{
	local port=$((20000 + RANDOM % 10000))
	timeout 120 srun -N2 --ntasks-per-node=1 -w node1,node2 bash -c \
		'exec /usr/bin/python3 "$1" --nnodes 2 --nproc_per_node 2 --node_rank "$SLURM_NODEID" \
			--master_addr node1 --master_port "$2" --max_restarts 3 --no_python \
			bash -c "$3"' sh "$TORCHRUN" "$port" "$PRINT" 2>"$BATS_TEST_TMPDIR/torchrun.err" |
		grep '^node[12] '
}

# same LINES_A LINES_B VARS...: every rank of A has B's value of each of VARS.
same()
{
	local a=$1 b=$2 host l v va vb
	shift 2
	for host in node1 node2; do
		for l in 0 1; do
			for v in "$@"; do
				va=$(value "$a" "$host" "$l" "$v")
				vb=$(value "$b" "$host" "$l" "$v")
				[ -n "$va" ] || { echo "$host rank $l: no $v"; return 1; }
				# What this PyTorch's torchrun does not set yet (PyTorch 1.13
				# has no TORCH_NCCL_ASYNC_ERROR_HANDLING) is not compared.
				[ "$vb" != - ] || continue
				[ "$va" = "$vb" ] || { echo "$host local rank $l: $v=$va, torchrun's $vb"; return 1; }
			done
		done
	done
}

@test "a plain srun task gets torchrun's values of the variables torchrun sets for its rank" {
	local tr ours
	tr=$(torchrun_lines)
	echo "torchrun:"; echo "$tr"
	[ "$(wc -l <<<"$tr")" -eq 4 ]
	ours=$(timeout 60 srun -N2 --ntasks-per-node=2 -w node1,node2 --phx-place=block \
		--phx-layout='dp=*' bash -c "$PRINT")
	echo "plugin:"; echo "$ours"
	same "$ours" "$tr" RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK \
		GROUP_WORLD_SIZE ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE MASTER_ADDR
	# No agent restarts a task: torchrun's restart variables are not set (phalanx(7)).
	! grep -q 'TORCHELASTIC_RESTART_COUNT=[0-9]' <<<"$ours"
	# Each rank has an error file of its own for @record, as under torchrun.
	for host in node1 node2; do
		for l in 0 1; do
			[ "$(value "$ours" "$host" "$l" TORCHELASTIC_ERROR_FILE)" != - ]
		done
	done
	[ "$(grep -o 'TORCHELASTIC_ERROR_FILE=[^ ]*' <<<"$ours" | sort -u | wc -l)" -eq 4 ]
}

@test "a plain srun job's failure is reported with the failing rank and its @record root cause" {
	run --separate-stderr timeout 120 srun -N2 --ntasks-per-node=2 -w node1,node2 \
		--phx-place=block --phx-layout='dp=*' /usr/bin/python3 \
		"$BATS_TEST_DIRNAME/record_failure.py" 3
	echo "$stderr"
	[ "$status" -ne 0 ]
	# torchrun's "first observed failure": the rank that raised, not the ranks
	# whose collective then lost their peer.
	[ "$(grep -c 'root cause' <<<"$stderr")" -eq 1 ]
	grep -q 'phalanx: rank 3 (local rank 1 on node2) exited with code 1; root cause (torch @record): ValueError: injected failure on rank 3;' <<<"$stderr"
	# The step's error files went with it: slurmstepd removes them in the
	# plugin's exit callback, which may still run after srun has returned.
	wait_for 30 no_step_dirs
}

# Whether node1 and node2 hold no step error-file folder.
no_step_dirs()
{
	local left

	left=$(srun -N2 -w node1,node2 bash -c 'ls -d /tmp/phalanx-step.* 2>/dev/null; true') &&
		[ -z "$left" ]
}

# What a hostile user puts where their error file goes, while slurmstepd,
# which reads it, runs as root.
@test "a task's error file is read as the job's user: a link to a root-only file, a FIFO or a huge file yield nothing" {
	local as_nobody
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
	run --separate-stderr timeout 120 "${as_nobody[@]}" env -C / srun -N1 --ntasks-per-node=4 \
		-w node1 --phx-place=block --phx-layout='dp=*' bash -c '
		f=$TORCHELASTIC_ERROR_FILE
		case $SLURM_LOCALID in
		0) ln -s /etc/shadow "$f" ;;
		1) mkfifo "$f" ;;
		2) head -c 5000000 /dev/zero | tr "\0" a >"$f" ;;
		3) echo "{\"message\": {\"message\": \"marker of the user\"}}" >"$f" ;;
		esac
		exit 1'
	echo "$stderr"
	[ "$status" -ne 0 ]
	# What the user wrote is reported; what root alone could read is not.
	[ "$(grep -c 'root cause' <<<"$stderr")" -eq 1 ]
	grep -q 'rank 3 (local rank 3 on node1) exited with code 1; root cause (torch @record): marker of the user;' <<<"$stderr"
	! grep -q 'root:' <<<"$stderr"
	! grep -q aaaaaaaa <<<"$stderr"
}

@test "a phalanx-launch worker gets torchrun's values of the variables torchrun sets for its rank" {
	local tr ours l host
	tr=$(torchrun_lines)
	echo "torchrun:"; echo "$tr"
	[ "$(wc -l <<<"$tr")" -eq 4 ]
	ours=$(timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=1 -w node1,node2 "$LAUNCH" --agent \
		--nproc-per-node 2 --max-restarts 3 -- bash -c "$PRINT" | sed 's/^\[rank [0-9]*\] //')
	echo "phalanx-launch:"; echo "$ours"
	same "$ours" "$tr" RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK \
		GROUP_WORLD_SIZE ROLE_NAME ROLE_RANK ROLE_WORLD_SIZE TORCHELASTIC_RESTART_COUNT \
		TORCHELASTIC_MAX_RESTARTS TORCH_NCCL_ASYNC_ERROR_HANDLING
	for host in node1 node2; do
		for l in 0 1; do
			# Set in both, with values of their own: the run id, the error file
			# (one per rank), the rendezvous.
			[ "$(value "$ours" "$host" "$l" TORCHELASTIC_RUN_ID)" != - ]
			[ "$(value "$ours" "$host" "$l" TORCHELASTIC_ERROR_FILE)" != - ]
			[ "$(value "$tr" "$host" "$l" TORCHELASTIC_ERROR_FILE)" != - ]
			[ "$(value "$ours" "$host" "$l" MASTER_PORT)" != - ]
		done
	done
	# Rank 0 hosts the store itself (phalanx(7)): False where torchrun's agent hosts it.
	[ "$(value "$ours" node1 0 TORCHELASTIC_USE_AGENT_STORE)" = False ]
}
