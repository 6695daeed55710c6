#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# torch.cuda.set_device(LOCAL_RANK), which Megatron-LM, DeepSpeed,
# torchtitan, Accelerate and Lightning call, must select the rank's own GPU:
# for every task (plain srun) and worker (phalanx-launch) on the lab's fake
# GPUs, the GPU that the CUDA runtime would select for device LOCAL_RANK
# (tests/cluster/cuda_device.py resolves it the way cudaSetDevice does,
# from the device files the task can open and CUDA_VISIBLE_DEVICES) is one
# of Slurm's GPUs for it, no other rank of the node has it, and the binding
# follows it. Also: Slurm's task variables as Lightning and submitit read
# them agree with the ranks.

load lib

setup_file()
{
	require_lab
	LAB=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB
	export DEVICE=$BATS_TEST_DIRNAME/cuda_device.py
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
	[ -c "$LAB/dev/gpu7" ] || skip "the lab has fewer than 8 GPUs per node"
}

teardown()
{
	[ -f "$BATS_TEST_TMPDIR/phalanx.yaml" ] &&
		cp "$BATS_TEST_TMPDIR/phalanx.yaml" "$LAB/etc/phalanx.yaml"
	if [ -n "${holder:-}" ]; then
		scancel "$holder" 2>/dev/null
		wait_for 30 job_finished "$holder"
	fi
	return 0
}

# field LINE NAME: the value of NAME=... in a cuda_device.py line.
field()
{
	tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"
}

# The comma list $1, sorted numerically, on one line.
sorted_list()
{
	tr ',' '\n' <<<"$1" | sort -n | paste -sd, -
}

# Holds GPUs 0-2 of node1, so Slurm gives the next step there others: the
# CUDA numbers then differ from Slurm's GPU numbers.
hold_low_gpus()
{
	holder=$(sbatch --parsable -w node1 --gres=gpu:3 -o /dev/null --wrap 'sleep 120')
	[[ $holder =~ ^[0-9]+$ ]]
	wait_for 30 job_running "$holder"
}

# check_own_gpus EXPECT_TASKS_PER_HOST: the contract over the lines in
# $output (one per rank; a "[rank N] " prefix is dropped). Every rank's
# device LOCAL_RANK resolves to a GPU; on each host the ranks' GPUs are
# distinct, all of them Slurm's for the step (SLURM_STEP_GPUS) and all
# ranks see one CUDA_VISIBLE_DEVICES (CUDA IPC and P2P work between them).
check_own_gpus()
{
	local per_host=$1 lines line host gpus step

	lines=$(sed -n 's/^\(\[rank [0-9]*\] \)\{0,1\}\(host=.*\)/\2/p' <<<"$output")
	[ -n "$lines" ]
	for host in $(while read -r line; do field "$line" host; done <<<"$lines" | sort -u); do
		gpus= step=
		while read -r line; do
			[ "$(field "$line" host)" = "$host" ] || continue
			[ "$(field "$line" gpu)" != invalid ]
			[ "$(field "$line" device)" = "$(field "$line" local)" ]
			# The binding's number for it is the device LOCAL_RANK.
			[ "$(field "$line" cudadev)" = "$(field "$line" local)" ]
			gpus+="${gpus:+,}$(field "$line" gpu)"
			step+="${step:+,}$(field "$line" step)"
		done <<<"$lines"
		echo "$host: GPUs selected $gpus; Slurm's $(sorted_list "$step" | tr ',' '\n' | sort -un | paste -sd, -)"
		[ "$(tr ',' '\n' <<<"$gpus" | grep -c .)" -eq "$per_host" ]
		# Distinct...
		[ "$(tr ',' '\n' <<<"$gpus" | sort -u | grep -c .)" -eq "$per_host" ]
		# ...and each one of Slurm's GPUs for the step on that host.
		for g in ${gpus//,/ }; do
			tr ',' '\n' <<<"$step" | grep -qx "$g"
		done
	done
	# One CUDA_VISIBLE_DEVICES per host.
	[ "$(while read -r line; do echo "$(field "$line" host) $(field "$line" cvd)"; done <<<"$lines" |
		sort -u | awk '{ print $1 }' | uniq -d)" = "" ]
}

@test "--gres=gpu:4: set_device(LOCAL_RANK) selects each task's own GPU, distinct on its node" {
	run --separate-stderr srun -N2 --ntasks-per-node=4 --gres=gpu:4 --phx-layout=tp=2,dp='*' \
		/usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 8 ]
	check_own_gpus 4
}

@test "--gpus-per-node=4 beside another job's GPUs: the CUDA numbers still select the task's own" {
	hold_low_gpus
	run --separate-stderr srun -N1 -w node1 --ntasks-per-node=4 --gpus-per-node=4 \
		--phx-layout='dp=*' /usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	check_own_gpus 4
	# Not the holder's GPUs 0-2.
	! grep -qE ' gpu=[0-2] ' <<<"$output"
}

@test "--gpus-per-task=1: set_device(LOCAL_RANK) selects the GPU Slurm bound the task to" {
	local line
	hold_low_gpus
	run --separate-stderr srun -N1 -w node1 -n4 --gpus-per-task=1 --phx-layout='dp=*' \
		/usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	for line in "${lines[@]}"; do
		# Slurm's per-task binding names one GPU: the one CUDA selects.
		[ "$(field "$line" gpu)" = "$(field "$line" step)" ]
		# Every task sees the step's four, in one order.
		[ "$(field "$line" count)" -eq 4 ]
	done
	check_own_gpus 4
}

@test "--phx-isolate=off: the same with Slurm's own numbering" {
	run --separate-stderr srun -N1 -w node2 --ntasks-per-node=2 --gres=gpu:2 --phx-isolate=off \
		--phx-layout='dp=*' /usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	check_own_gpus 2
}

@test "phalanx-launch's workers: set_device(LOCAL_RANK) selects each worker's own GPU" {
	local launch=$PHX_BUILD_DIR/launcher/phalanx-launch
	run --separate-stderr timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=1 --gres=gpu:4 \
		"$launch" --agent -- /usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "$(grep -c '^\[rank [0-7]\] host=' <<<"$output")" -eq 8 ]
	check_own_gpus 4
}

@test "--phx-isolate=task: srun says what set_device(LOCAL_RANK) needs; PHALANX_CUDA_DEVICE selects the task's own" {
	local line
	run --separate-stderr srun -N1 -w node3 --ntasks-per-node=2 --gres=gpu:2 --phx-isolate=task \
		--phx-layout='dp=*' bash -c '/usr/bin/python3 "$1" "$2" "$PHALANX_CUDA_DEVICE"' sh \
		"$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	grep -q 'phalanx: .*--phx-isolate=task: each task sees only its own GPU, as CUDA device 0.*use --phx-isolate=job' <<<"$stderr"
	[ "${#lines[@]}" -eq 2 ]
	for line in "${lines[@]}"; do
		[ "$(field "$line" count)" -eq 1 ]
		# Task i keeps the i-th of the step's GPUs.
		[ "$(field "$line" gpu)" = "$(cut -d, -f$(($(field "$line" local) + 1)) <<<"$(field "$line" step)")" ]
		[ "$(field "$line" cudadev)" = 0 ]
	done
	[ "$(field "${lines[0]}" gpu)" != "$(field "${lines[1]}" gpu)" ]
	# What the warning is about: device LOCAL_RANK=1 does not exist there.
	run srun -N1 -w node3 --ntasks-per-node=2 --gres=gpu:2 --phx-isolate=task \
		--phx-layout='dp=*' /usr/bin/python3 "$DEVICE" "$LAB"
	[ "$(grep -c ' local=1 .* gpu=invalid ' <<<"$output")" -eq 1 ]
}

# Binding against a described node: tests/data/hwloc/two-socket.xml has GPU
# 0 with mlx5_0 and CPU 0, GPU 1 with mlx5_1 and CPU 1.
@test "the CPUs and NIC a rank is bound to are those of the GPU it selects, in job and task isolation" {
	local line gpu mode
	cp "$LAB/etc/phalanx.yaml" "$BATS_TEST_TMPDIR/phalanx.yaml"
	printf 'placement:\n  hwloc_xml: "%s"\n' \
		"$(cd "$BATS_TEST_DIRNAME/../data/hwloc" && pwd)/two-socket.xml" >>"$LAB/etc/phalanx.yaml"
	for mode in job task; do
		run --separate-stderr srun -N1 -w node4 --ntasks-per-node=2 --gres=gpu:2 \
			--phx-isolate=$mode --phx-layout='dp=*' bash -c \
			'/usr/bin/python3 "$1" "$2" "$PHALANX_CUDA_DEVICE" | tr -d "\n"; echo " hca=$NCCL_IB_HCA"' \
			sh "$DEVICE" "$LAB"
		show_run
		[ "$status" -eq 0 ]
		[ "${#lines[@]}" -eq 2 ]
		for line in "${lines[@]}"; do
			gpu=$(field "$line" gpu)
			[ "$(field "$line" cpus)" = "$gpu" ]
			[ "$(field "$line" hca)" = "=mlx5_$gpu:1" ]
		done
		[ "$(field "${lines[0]}" gpu)" != "$(field "${lines[1]}" gpu)" ]
	done
}

# The rules by which PyTorch Lightning's SLURMEnvironment and submitit's
# JobEnvironment read a task (their documentation): global rank
# SLURM_PROCID, local rank SLURM_LOCALID, node rank SLURM_NODEID, world
# size SLURM_NTASKS, and (Lightning) SLURM_NTASKS_PER_NODE equal to the
# processes per node. check_slurm_view LAUNCHER: every rank's reading is
# consistent: ranks a permutation of 0..WORLD_SIZE-1, local rank
# LOCAL_RANK (so their device choice is the one checked above), one node
# rank per host; under the launcher the rank is RANK itself.
check_slurm_view()
{
	local lines line world=0 hosts

	lines=$(sed -n 's/^\(\[rank [0-9]*\] \)\{0,1\}\(host=.*\)/\2/p' <<<"$output")
	while read -r line; do
		world=$(field "$line" world)
		[ "$(field "$line" ntasks)" = "$world" ]
		[ "$(field "$line" localid)" = "$(field "$line" local)" ]
		[ "$(field "$line" tpn)" = "$2" ]
		[ "$1" != launcher ] || [ "$(field "$line" procid)" = "$(field "$line" rank)" ]
	done <<<"$lines"
	[ "$(while read -r line; do field "$line" procid; done <<<"$lines" | sort -n | paste -sd' ')" = \
	  "$(seq -s ' ' 0 $((world - 1)))" ]
	# One node rank per host, different hosts different ones.
	hosts=$(while read -r line; do echo "$(field "$line" host) $(field "$line" nodeid)"; done <<<"$lines" | sort -u)
	[ "$(awk '{ print $1 }' <<<"$hosts" | uniq -d)" = "" ]
	[ "$(awk '{ print $2 }' <<<"$hosts" | sort | uniq -d)" = "" ]
}

@test "Lightning's and submitit's reading of Slurm's variables agrees with the workers' ranks" {
	local launch=$PHX_BUILD_DIR/launcher/phalanx-launch
	run --separate-stderr timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=1 --gres=gpu:2 \
		"$launch" --agent -- /usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	check_slurm_view launcher 2
}

@test "Lightning's and submitit's reading of Slurm's variables is consistent on a plain srun" {
	run --separate-stderr srun -N2 --ntasks-per-node=2 --gres=gpu:2 --phx-layout=tp=2,dp='*' \
		/usr/bin/python3 "$DEVICE" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	check_slurm_view srun 2
}
