#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Rank placement, the torchrun environment, binding and the job token, as
# the plugin sets them per task on a plain srun (no launcher).

load lib

setup_file()
{
	require_lab
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
}

# One line per task: SLURM_PROCID RANK LOCAL_RANK SLURM_LOCALID WORLD_SIZE
# LOCAL_WORLD_SIZE GROUP_RANK MASTER host tp cp ep dp pp CUDA_VISIBLE_DEVICES
REPORT='echo "$SLURM_PROCID $RANK $LOCAL_RANK $SLURM_LOCALID $WORLD_SIZE $LOCAL_WORLD_SIZE'
REPORT+=' $GROUP_RANK $MASTER_ADDR:$MASTER_PORT $(hostname) $PHALANX_TP_RANK $PHALANX_CP_RANK'
REPORT+=' $PHALANX_EP_RANK $PHALANX_DP_RANK $PHALANX_PP_RANK $CUDA_VISIBLE_DEVICES"'

# Checks the per-task report of a tp=4,pp=2,dp=* layout on 4 nodes x 8 tasks.
check_layout_report()
{
	local ranks masters
	ranks=$(awk '{ print $2 }' <<<"$1" | sort -n | tr '\n' ' ')
	[ "$ranks" = "$(seq -s ' ' 0 31) " ]
	# torchrun's contract: LOCAL_RANK is the task on its node.
	awk '$3 != $4 || $5 != 32 || $6 != 8 { bad = 1 } END { exit bad }' <<<"$1"
	masters=$(awk '{ print $8 }' <<<"$1" | sort -u)
	[ "$(wc -l <<<"$masters")" -eq 1 ]
	# MASTER_ADDR is where rank 0 runs.
	[ "${masters%%:*}" = "$(awk '$2 == 0 { print $9 }' <<<"$1")" ]
	# Coordinates give back the rank (order tp-cp-ep-dp-pp, tp fastest).
	awk '$2 != $10 + 4 * ($13 + 4 * $14) { bad = 1 } END { exit bad }' <<<"$1"
	# Every tensor-parallel group shares one node.
	[ "$(awk '{ print $13 "/" $14, $9 }' <<<"$1" | sort -u | wc -l)" -eq 8 ]
	# The task's own GPU is CUDA device LOCAL_RANK of the list every task of the node shares.
	awk '{ split($15, g, ","); if (g[$3 + 1] != $4) bad = 1 } END { exit bad }' <<<"$1"
	[ "$(awk '{ print $9, $15 }' <<<"$1" | sort -u | wc -l)" -eq 4 ]
}

@test "--phx-layout sets the torchrun environment from the placement" {
	run --separate-stderr srun -N4 --ntasks-per-node=8 --gres=gpu:8 \
		--phx-layout=tp=4,pp=2,dp='*' bash -c "$REPORT"
	show_run
	[ "$status" -eq 0 ]
	check_layout_report "$output"
	# On these 4 nodes of one switch Slurm's block order is as short a
	# step as any (the tensor-parallel rings on NVLink are its busiest
	# links), so the plan may keep it; 46-blocks checks a plan that must
	# leave it.
}

@test "PHX_LAYOUT works like --phx-layout" {
	PHX_LAYOUT='tp=4,pp=2,dp=*' run --separate-stderr srun -N4 --ntasks-per-node=8 \
		--gres=gpu:8 bash -c "$REPORT"
	show_run
	[ "$status" -eq 0 ]
	check_layout_report "$output"
}

@test "--phx-place=block keeps Slurm's order: RANK is SLURM_PROCID" {
	run --separate-stderr srun -N4 --ntasks-per-node=8 --gres=gpu:8 \
		--phx-layout=tp=4,pp=2,dp='*' --phx-place=block bash -c "$REPORT"
	show_run
	[ "$status" -eq 0 ]
	awk '$1 != $2 { bad = 1 } END { exit bad }' <<<"$output"
	[ "$(wc -l <<<"$output")" -eq 32 ]
}

@test "without a layout the plugin sets no rank environment" {
	run --separate-stderr srun -N2 --ntasks-per-node=2 bash -c 'echo "[${RANK:-unset}]"'
	show_run
	[ "$status" -eq 0 ]
	[ "$(sort -u <<<"$output")" = "[unset]" ]
}

@test "--phx-explain prints the rank map and the placement cost" {
	run --separate-stderr srun -N2 --ntasks-per-node=4 --gres=gpu:4 \
		--phx-layout=tp=2,pp=2,dp='*' --phx-explain true
	show_run
	[ "$status" -eq 0 ]
	[ "$(grep -c '^phalanx: rank [0-9]*/8 on node[12] slot [0-3]: ' <<<"$stderr")" -eq 8 ]
	grep -q '^phalanx: placement .*cost [0-9]*, Slurm.s order [0-9]*, lower bound [0-9]*' \
		<<<"$stderr"
}

@test "a layout that does not fit the step is refused before anything runs" {
	run --separate-stderr srun -N2 --ntasks-per-node=4 --phx-layout=tp=3 \
		bash -c 'echo ran'
	show_run
	[ "$status" -ne 0 ]
	[ -z "$output" ]
	grep -q 'phalanx: .*--phx-layout=tp=3 does not fit this step of 8 tasks' <<<"$stderr"
}

@test "a bad layout spec is refused with a precise message" {
	run --separate-stderr srun -N1 --phx-layout=tp=2,xp=4 true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: .*xp" <<<"$stderr"
	run --separate-stderr sbatch --phx-layout=tp=0 --wrap true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: .*tp" <<<"$stderr"
}

@test "uneven tasks per node are refused with a hint" {
	run --separate-stderr srun -N2 -n3 --phx-layout='dp=*' true
	show_run
	[ "$status" -ne 0 ]
	grep -q 'phalanx: .*same number of tasks on every node.*--ntasks-per-node' <<<"$stderr"
}

@test "PHALANX_JOB_TOKEN is the job's HMAC and a forged one is replaced" {
	local key=$(dirname "$SLURM_CONF")/phalanx.key
	run --separate-stderr env PHALANX_JOB_TOKEN=forged srun -N1 bash -c \
		'echo "$SLURM_JOB_ID $(id -u) $PHALANX_JOB_TOKEN"'
	show_run
	[ "$status" -eq 0 ]
	read -r job uid token <<<"$output"
	expected=$(python3 -c 'import hmac, hashlib, sys
key = bytes.fromhex(open(sys.argv[1]).read().strip())
msg = f"phalanx-job-token:v1:{sys.argv[2]}:{sys.argv[3]}".encode()
print(hmac.new(key, msg, hashlib.sha256).hexdigest())' "$key" "$job" "$uid")
	[ "$token" = "$expected" ]
}

@test "an unmodified PyTorch DDP script trains under plain srun --phx-layout" {
	local ckpt
	ckpt=$(mktemp -d)
	run --separate-stderr srun -N2 --ntasks-per-node=2 --phx-layout='dp=*' \
		--export=ALL,GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 \
		"$BATS_TEST_DIRNAME/../demo/train.py" --steps 20 --ckpt-every 10 \
		--step-sleep 0 --ckpt-dir "$ckpt"
	show_run
	rm -rf "$ckpt"
	[ "$status" -eq 0 ]
	grep -q 'finished 20 steps.*replicas identical: True' <<<"$output"
}

# Binding against a described node: tests/data/hwloc/two-socket.xml has GPU
# 0 with mlx5_0 and CPU 0, GPU 1 with mlx5_1 and CPU 1.
use_two_socket_topology()
{
	local conf
	conf=$(dirname "$SLURM_CONF")/phalanx.yaml
	cp "$conf" "$BATS_FILE_TMPDIR/phalanx.yaml.orig"
	printf 'placement:\n  hwloc_xml: "%s"\n' \
		"$(cd "$BATS_TEST_DIRNAME/../data/hwloc" && pwd)/two-socket.xml" >>"$conf"
}

restore_config()
{
	[ -f "$BATS_FILE_TMPDIR/phalanx.yaml.orig" ] &&
		cp "$BATS_FILE_TMPDIR/phalanx.yaml.orig" "$(dirname "$SLURM_CONF")/phalanx.yaml"
	return 0
}

teardown()
{
	restore_config
}

BIND_REPORT='echo "$SLURM_LOCALID $CUDA_VISIBLE_DEVICES $NCCL_IB_HCA $UCX_NET_DEVICES'
BIND_REPORT+=' $NCCL_SOCKET_IFNAME $OMP_NUM_THREADS'
BIND_REPORT+=' $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'

@test "each task is bound to its GPU's NUMA CPUs and paired NIC" {
	use_two_socket_topology
	run --separate-stderr srun -N1 --ntasks-per-node=2 --gres=gpu:2 --phx-layout='dp=*' \
		bash -c "$BIND_REPORT"
	show_run
	[ "$status" -eq 0 ]
	[ "$(sort <<<"$output")" = "0 0,1 =mlx5_0:1 mlx5_0:1 =ib0 1 0
1 0,1 =mlx5_1:1 mlx5_1:1 =ib1 1 1" ]
}

@test "binding keeps the NCCL, UCX and OpenMP settings the user made" {
	use_two_socket_topology
	run --separate-stderr srun -N1 --ntasks-per-node=2 --gres=gpu:2 --phx-layout='dp=*' \
		--export=ALL,NCCL_IB_HCA=mlx5_9,OMP_NUM_THREADS=7 bash -c 'echo "$SLURM_LOCALID $NCCL_IB_HCA $OMP_NUM_THREADS"'
	show_run
	[ "$status" -eq 0 ]
	[ "$(sort <<<"$output")" = "0 mlx5_9 7
1 mlx5_9 7" ]
}

@test "inside a batch job every node of the step gets its own ranks" {
	local out job
	out=$(mktemp)
	run --separate-stderr sbatch --parsable -N4 --ntasks-per-node=2 --gres=gpu:2 -o "$out" \
		--wrap "srun --phx-layout='dp=*' bash -c 'echo \$(hostname) \$RANK'"
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	wait_for 60 job_finished "$job"
	[ "$(job_state "$job")" = COMPLETED ]
	cat "$out"
	[ "$(awk '{ print $2 }' "$out" | sort -n | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ]
	[ "$(awk '{ print $1 }' "$out" | sort | uniq -c | awk '{ print $1 }' | sort -u)" = 2 ]
	rm -f "$out"
}

@test "phalanx plan --megatron gives Megatron-LM's arguments for a layout, and refuses an order it cannot form" {
	local phx=$PHX_BUILD_DIR/cli/phalanx
	run --separate-stderr "$phx" plan --layout 'tp=2,ep=8,pp=4,dp=*' --nodes 'n[1-16]' \
		--gpus-per-node 8 --megatron --json
	show_run
	[ "$status" -eq 0 ]
	[ "$(jq -r .megatron.args <<<"$output")" = \
	  "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8" ]
	# Megatron-Core derives data parallel ep x dp and expert data parallel dp.
	[ "$(jq -r '.megatron | "\(.dp) \(.edp)"' <<<"$output")" = "16 2" ]
	# Every tensor-parallel group the plan keeps on a node is two consecutive ranks.
	[ "$(jq -r '.ranks[] | "\(.rank / 2 | floor) \(.node)"' <<<"$output" | sort -u | wc -l)" -eq 64 ]
	run --separate-stderr "$phx" plan --layout 'tp=8,pp=4,dp=*,order=pp-tp-cp-ep-dp' \
		--nodes 'n[1-16]' --gpus-per-node 8 --megatron
	show_run
	[ "$status" -eq 2 ]
	grep -q 'phalanx: .*--megatron: .*the nearest layout it can express is tp=8,cp=1,ep=1,dp=4,pp=4,order=tp-cp-ep-pp-dp' <<<"$stderr"
}
