#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# torch.distributed.checkpoint through phalanx.dcp on the lab: a job of 8
# ranks (4 nodes x 2) trains and saves its model and optimizer state with
# dcp.save; on PyTorch 2.6 the state is FSDP2's (fully_shard over the
# ranks, DTensors). Jobs of 4 and 6 ranks load it from the shared tier and
# DCP's planner reshards it: the full tensors they hold are the saved ones,
# byte for byte, also after dcp.async_save, whose state the job changes as
# soon as it returns (the stager's contract). Through the agent a job of
# the same ranks loads its own shards; a plan that needs shards the agent
# cannot give is refused with the reason, and a save without an agent
# fails on every rank, never hangs.
# PyTorch 1.13's DCP does not import under Python 3.11 (Debian 12): there
# phalanx.dcp must say so, and the jobs run on Debian 13's PyTorch 2.6.
# lab-nodes: 4

load lib

setup_file()
{
	require_lab
	need_launch_lab 4 || return 1
	use_python_module
	export JOB=$BATS_TEST_DIRNAME/dcp_job.py
	export JOB_NAME=phx-dcp-tests SLURM_JOB_NAME=phx-dcp-tests
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export GLOO_SOCKET_IFNAME=eth0
	NO_DCP=
	/usr/bin/python3 -c 'import torch.distributed.checkpoint' 2>/dev/null ||
		/usr/bin/python3 -c 'import torch.distributed._shard.checkpoint' 2>/dev/null ||
		NO_DCP="this PyTorch's torch.distributed.checkpoint does not import; the DCP jobs run on PyTorch 2.x (Debian 13's stack)"
	export NO_DCP
}

need_dcp()
{
	[ -z "$NO_DCP" ] || skip "$NO_DCP"
}

setup()
{
	RUN=dcp$BATS_TEST_NUMBER.$$
	SHARED=$BATS_TEST_TMPDIR/shared
}

teardown()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	rm -rf "$LAB_DIR"/nodes/node*/tmp/"$RUN"*
}

# conf NAME: a phalanx.yaml whose tiers are the node-local NAME and, when
# SHARED is set, the shared tier SHARED, each save going to both.
conf()
{
	local f=$BATS_TEST_TMPDIR/$1.yaml
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$f"
	cat >>"$f" <<EOC
checkpoint:
  keep: 2
  interval: 1000
  local_dir: "$LAB_DIR/nodetmp/$RUN-$1/%n"
  local_every: 1
  shared_dir: "${SHARED_DIR:-}"
  shared_every: 1
EOC
	echo "$f"
}

# dcp NODES CONF OUT -- dcp_job.py options: NODES nodes x 2 workers, always
# the first NODES of the lab: a load through the agents finds the shards on
# the nodes that saved them (Slurm may pick others while those complete).
dcp()
{
	local nodes=$1 cf=$2 out=$3 list=node1
	shift 4
	[ "$nodes" -eq 1 ] || list="node[1-$nodes]"
	timeout 300 srun --mpi=pmix -N"$nodes" -w "$list" --ntasks-per-node=1 -K1 "$LAUNCH" --agent \
		--config "$cf" --nproc-per-node 2 ${LAUNCH_OPTS:-} -- /usr/bin/python3 "$JOB" "$@" \
		>"$out" 2>&1 || {
		local rc=$?
		cat "$out"
		return $rc
	}
	cat "$out"
}

sha_of()
{
	awk '$1 == "[rank" && $2 == "0]" && $3 == "state" && $4 == "sha256" { print $5 }' "$1" |
		tail -1
}

@test "phalanx.dcp imports where PyTorch's DCP does, and says why where it does not" {
	run /usr/bin/python3 -c 'import phalanx.dcp'
	echo "$output" >&2
	if [ -z "$NO_DCP" ]; then
		[ "$status" -eq 0 ]
	else
		[ "$status" -ne 0 ]
		[[ "$output" == *"ImportError: phalanx: phalanx.dcp needs torch.distributed.checkpoint, which PyTorch "*" here cannot import"* ]]
	fi
}

@test "dcp.async_save on 8 ranks loads resharded on 4 and 6 ranks from the shared tier, byte for byte" {
	local saved got n
	need_dcp
	SHARED_DIR=$SHARED dcp 4 "$(SHARED_DIR=$SHARED conf save)" "$BATS_TEST_TMPDIR/save" -- save --async
	grep -q '^\[rank 0\] world 8 ' "$BATS_TEST_TMPDIR/save"
	grep -q '^\[rank 0\] saved step 6 durable True' "$BATS_TEST_TMPDIR/save"
	saved=$(sha_of "$BATS_TEST_TMPDIR/save")
	[ -n "$saved" ]
	# Every rank's shard and the generation's manifest are in the shared tier.
	ls "$SHARED/gen-000000000006" | sort | tr '\n' ' ' |
		grep -q '^manifest.json rank-0.shard .*rank-7.shard $'
	grep -q '"world":8' "$SHARED/gen-000000000006/manifest.json"
	for n in 2 3; do
		dcp "$n" "$(conf "load$n")" "$BATS_TEST_TMPDIR/load$n" -- load --dir "$SHARED"
		grep -q "^\[rank 0\] world $((2 * n)) " "$BATS_TEST_TMPDIR/load$n"
		grep -q '^\[rank 0\] loaded step 6$' "$BATS_TEST_TMPDIR/load$n"
		got=$(sha_of "$BATS_TEST_TMPDIR/load$n")
		echo "world $((2 * n)): $got, saved on 8: $saved" >&2
		[ "$got" = "$saved" ]
	done
	# A generation directory works as well as the tier.
	dcp 2 "$(conf loadgen)" "$BATS_TEST_TMPDIR/loadgen" -- load --dir "$SHARED/gen-000000000006"
	[ "$(sha_of "$BATS_TEST_TMPDIR/loadgen")" = "$saved" ]
}

@test "dcp.async_save in place (snapshot=False), and one whose shards outgrow the room staged: both load back through the agent" {
	local cf saved
	need_dcp
	cf=$(conf inplace)
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/save" -- save --async --in-place
	grep -q '^\[rank 0\] saved step 6 durable True' "$BATS_TEST_TMPDIR/save"
	saved=$(sha_of "$BATS_TEST_TMPDIR/save")
	[ -n "$saved" ]
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/load" -- load
	[ "$(sha_of "$BATS_TEST_TMPDIR/load")" = "$saved" ]
	# No room for the pickled items and the metadata: copied once more, still whole.
	cf=$(conf noroom)
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/save2" -- save --async --no-room
	grep -q "^\[rank 0\] .*phalanx: this rank's DCP shard ([0-9]* bytes) outgrew the [0-9]* bytes staged for it" \
		"$BATS_TEST_TMPDIR/save2"
	saved=$(sha_of "$BATS_TEST_TMPDIR/save2")
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/load2" -- load
	[ "$(sha_of "$BATS_TEST_TMPDIR/load2")" = "$saved" ]
}

@test "dcp.load through the agent restores the same ranks; another world is refused with the reason" {
	local cf saved
	need_dcp
	cf=$(conf agent)
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/save" -- save
	saved=$(sha_of "$BATS_TEST_TMPDIR/save")
	[ -n "$saved" ]
	# No shared tier: the ranks' shards are on their own nodes only.
	dcp 2 "$cf" "$BATS_TEST_TMPDIR/load" -- load
	grep -q '^\[rank 0\] loaded step 6$' "$BATS_TEST_TMPDIR/load"
	[ "$(sha_of "$BATS_TEST_TMPDIR/load")" = "$saved" ]
	# One node: 2 ranks (dp=2) for the 4 saved ones' dp-sharded state. The
	# agents refuse to hand a rank another dp rank's part; DCP says where a
	# resharding load reads from.
	LAUNCH_OPTS="--max-restarts 0" run dcp 1 "$cf" "$BATS_TEST_TMPDIR/one" -- load
	echo "$output" >&2
	[ "$status" -ne 0 ]
	[[ "$output" == *"saved with dp=4, this job has dp=2"* ]]
	grep -q "^\[rank [01]\] phalanx: the agents restore each rank's own shard, and this job's layout is not the one" \
		"$BATS_TEST_TMPDIR/one"
	grep -q "give StorageReader the directory tier every rank can read" "$BATS_TEST_TMPDIR/one"
	! grep -q '^\[rank [01]\] loaded step' "$BATS_TEST_TMPDIR/one"
}

@test "dcp.save without an agent fails on every rank with the reason, and does not hang" {
	need_dcp
	# Plain srun: the plugin gives the ranks torchrun's environment (with a
	# placement), no agent runs.
	run timeout 120 srun -N2 --ntasks-per-node=2 --phx-place=block \
		--phx-layout='dp=*' /usr/bin/python3 "$JOB" save
	echo "$output" >&2
	[ "$status" -eq 3 ]
	[[ "$output" == *"phalanx: phalanx.dcp.StorageWriter needs a phalanx-launch agent; run the job with phalanx-launch"* ]]
	[[ "$output" == *$'\n'"save failed: "* ]]
}
