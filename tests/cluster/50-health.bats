#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Job prolog health checks on the lab's fake hardware: every node has an
# ACTIVE InfiniBand port in LAB/nodes/nodeI/sys and the GPU device files
# LAB/dev/gpuN (see 'lab --help'). A broken node is drained with Phalanx's
# reason and a requeued job runs elsewhere; a symlink a user planted is
# never followed by the root prolog. Each test leaves the cluster whole.

load lib

setup_file()
{
	require_lab
	LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_DIR
	cp "$LAB_DIR/etc/phalanx.yaml" "$BATS_FILE_TMPDIR/phalanx.yaml"
}

teardown_file()
{
	local n

	# Whatever failed above, give the next file a whole cluster.
	require_lab 2>/dev/null || return 0
	scancel --name=phx-health-block,phx-health-job 2>/dev/null
	restore_conf
	for n in $(sinfo -h -N -o %N | sort -u); do
		set_port "$n" '4: ACTIVE'
		node_drained "$n" && scontrol update nodename="$n" state=resume
	done
	rm -rf "$LAB_DIR/ckpt" "$LAB_DIR/elsewhere" "$LAB_DIR/fakedev"
	wait_for 30 all_idle || true
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
	wait_for 30 all_idle
}

port_file()
{
	echo "$LAB_DIR/nodes/$1/sys/class/infiniband/mlx5_0/ports/1/state"
}

set_port()
{
	[ ! -e "$(port_file "$1")" ] || echo "$2" >"$(port_file "$1")"
}

restore_conf()
{
	cp "$BATS_FILE_TMPDIR/phalanx.yaml" "$LAB_DIR/etc/phalanx.yaml"
}

# The lab's phalanx.yaml with these lines added to its health section.
health_conf()
{
	restore_conf
	add_health "$@"
}

# Appends lines to the health section, the last one in the lab's file.
add_health()
{
	[ "$(grep -E '^[a-z_]+:' "$LAB_DIR/etc/phalanx.yaml" | tail -n 1)" = health: ] ||
		{ echo "health: is not the last section of the lab's phalanx.yaml" >&2; return 1; }
	printf '  %s\n' "$@" >>"$LAB_DIR/etc/phalanx.yaml"
}

node_drained()
{
	case $(node_state "$1") in
	drain*) return 0 ;;
	esac
	return 1
}

all_idle()
{
	[ -z "$(sinfo -h -N -o %T | grep -vx idle)" ]
}

node_reason()
{
	scontrol show node "$1" | sed -n 's/^ *Reason=\(.*\) \[.*\]$/\1/p'
}

resume()
{
	scontrol update nodename="$1" state=resume
	wait_for 30 node_idle "$1"
}

phalanx_health()
{
	"$PHX_BUILD_DIR/cli/phalanx" health --config "$LAB_DIR/etc/phalanx.yaml" "$@"
}

job_requeued()
{
	[ "$(job_state "$1")" = PENDING ] && [ "$(job_field "$1" Restarts)" -ge 1 ]
}

@test "healthy fake hardware passes on every node, by hand and in the prolog" {
	for n in $(sinfo -h -N -o %N | sort -u); do
		run phalanx_health --node "$n" --job-gpus 0-7
		show_run
		[ "$status" -eq 0 ]
		grep -q '^  ib  *pass  1 port ACTIVE, lowest rate 200 Gb/s$' <<<"$output"
		grep -q '^  gpu  *pass  8 GPU device files present$' <<<"$output"
	done
	run --separate-stderr srun -N4 --gres=gpu:2 true
	show_run
	[ "$status" -eq 0 ]
	all_idle
}

@test "phalanx health names a DOWN port and exits 1" {
	set_port node3 '1: DOWN'
	run phalanx_health --node node3 --json
	set_port node3 '4: ACTIVE'
	show_run
	[ "$status" -eq 1 ]
	grep -q '"failed": 1' <<<"$output"
	grep -q "\"reason\": \"mlx5_0 port 1 is '1: DOWN', not '4: ACTIVE'\"" <<<"$output"
}

@test "a DOWN IB port drains node3 with phalanx's reason; the requeued job runs elsewhere" {
	local blockers=() n job out=$BATS_TEST_TMPDIR/out

	set_port node3 '1: DOWN'
	# Every other node busy: the job can only start on node3.
	for n in node1 node2 node4; do
		blockers+=("$(sbatch --parsable --exclusive -w "$n" -J phx-health-block \
			      -o /dev/null --wrap 'sleep 600')")
	done
	for n in "${blockers[@]}"; do
		wait_for 30 job_running "$n"
	done
	job=$(sbatch --parsable -N1 --exclusive --requeue -J phx-health-job -o "$out" \
	      --wrap 'hostname; echo "restarts=$SLURM_RESTART_COUNT"')

	wait_for 60 node_drained node3
	echo "node3: $(node_reason node3)"
	[[ $(node_reason node3) == "phalanx: health: ib: mlx5_0 port 1 is '1: DOWN', not '4: ACTIVE'" ]]
	sinfo -R -h -n node3 -o '%E' | grep -q '^phalanx: health: ib: mlx5_0 port 1'
	grep -q "error: phalanx: health: ib: mlx5_0 port 1 is '1: DOWN', not '4: ACTIVE'; check the cable" \
		"$LAB_DIR/log/slurmd-node3.log"
	# Requeued, not held (the lab sets SchedulerParameters=nohold_on_prolog_fail).
	wait_for 30 job_requeued "$job"

	scancel "${blockers[0]}"
	# Slurm keeps a requeued job back for 121 s (its credential lifetime);
	# that wait is Slurm's and not what is tested here.
	scontrol update jobid="$job" starttime=now
	wait_for 60 job_finished "$job"
	scancel "${blockers[@]}"
	echo "job $job: $(job_state "$job") on $(job_field "$job" NodeList): $(cat "$out")"
	[ "$(job_state "$job")" = COMPLETED ]
	[ "$(job_field "$job" NodeList)" != node3 ]
	[ "$(head -n 1 "$out")" != node3 ]
	grep -qx 'restarts=1' "$out"
	# Still drained: only an admin brings it back.
	node_drained node3

	set_port node3 '4: ACTIVE'
	resume node3
	run --separate-stderr srun -N1 -w node3 true
	[ "$status" -eq 0 ]
}

@test "the prolog checks the job's own GPUs (SLURM_JOB_GPUS)" {
	local i

	# node1 gets its own /dev, where GPU 5 is a plain file.
	mkdir -p "$LAB_DIR/fakedev/node1"
	for i in 0 1 2 3 4 6 7; do
		mknod "$LAB_DIR/fakedev/node1/gpu$i" c 195 "$i"
	done
	echo 'not a device' >"$LAB_DIR/fakedev/node1/gpu5"
	sed -i -e '/^  gpu_device:/d' -e '/^  gpu_count:/d' "$LAB_DIR/etc/phalanx.yaml"
	add_health 'gpu_device: "/gpu%u"' "dev_root: \"$LAB_DIR/fakedev/%n\""

	# Slurm hands out GPUs from 0 up: two never reach GPU 5, eight do.
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 true
	show_run
	[ "$status" -eq 0 ]
	run --separate-stderr srun -N1 -w node1 --gres=gpu:8 true
	restore_conf
	show_run
	[ "$status" -ne 0 ]
	wait_for 30 node_drained node1
	echo "node1: $(node_reason node1)"
	[[ $(node_reason node1) == "phalanx: health: gpu: GPU 5: $LAB_DIR/fakedev/node1/gpu5 is a regular file, not a character device" ]]
	resume node1
	rm -rf "$LAB_DIR/fakedev"
}

@test "the root prolog never follows a symlink a user planted in a checkpoint path" {
	mkdir -p "$LAB_DIR/ckpt/0" "$LAB_DIR/elsewhere"
	ln -sfn "$LAB_DIR/elsewhere" "$LAB_DIR/ckpt/65534"
	chown -h nobody "$LAB_DIR/ckpt/65534"
	# No file system has that much space: a path that is checked fails.
	health_conf 'min_free_gb: 1000000000' "paths: [\"$LAB_DIR/ckpt/%u/run\"]"

	# nobody's path leads through nobody's symlink: not checked, the job runs.
	run --separate-stderr runuser -u nobody -- sh -c 'cd / && srun -N1 -w node1 id -u'
	show_run
	[ "$status" -eq 0 ]
	[ "$output" = 65534 ]
	node_idle node1
	[ -L "$LAB_DIR/ckpt/65534" ]
	[ -z "$(ls -A "$LAB_DIR/elsewhere")" ]

	# root's path is a real directory: checked, and the node fails.
	run --separate-stderr srun -N1 -w node2 true
	restore_conf
	show_run
	[ "$status" -ne 0 ]
	wait_for 30 node_drained node2
	echo "node2: $(node_reason node2)"
	[[ $(node_reason node2) == "phalanx: health: disk: $LAB_DIR/ckpt/0/run: "*" GiB free, health.min_free_gb is 1000000000" ]]
	[ ! -e "$LAB_DIR/ckpt/0/run" ]
	resume node2
	rm -rf "$LAB_DIR/ckpt" "$LAB_DIR/elsewhere"
}

@test "health.enabled: false skips the checks; drain_on_failure: false leaves Slurm's reason" {
	set_port node4 '1: DOWN'
	health_conf 'enabled: false'
	run --separate-stderr srun -N1 -w node4 true
	show_run
	[ "$status" -eq 0 ]
	node_idle node4

	health_conf 'drain_on_failure: false'
	run --separate-stderr srun -N1 -w node4 true
	restore_conf
	set_port node4 '4: ACTIVE'
	show_run
	[ "$status" -ne 0 ]
	wait_for 30 node_drained node4
	echo "node4: $(node_reason node4)"
	[[ $(node_reason node4) != phalanx:* ]]
	grep -q "error: phalanx: health: ib: mlx5_0 port 1 is '1: DOWN'" "$LAB_DIR/log/slurmd-node4.log"
	resume node4
}
