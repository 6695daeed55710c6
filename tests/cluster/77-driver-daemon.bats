#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# phalanx-launch in driver mode reporting to phalanx-ckptd (daemon on the
# host side of the lab, acting in Slurm): a node killed mid-run is
# reported as dropped by the job's driver before the relaunch on the
# spare, and a node the daemon finds silent first is left to the driver:
# the daemon does not requeue a job whose driver is connected; the
# driver's recorded preflight results reach the daemon as check reports.
#
# lab-nodes: 5

load lib
load driver_jobs

setup_file()
{
	require_lab
	lab_has_plugin || skip "the lab was brought up with --no-plugin (no job tokens)"
	need_launch_lab 5 || return 1
	export PHX_LIBPHALANX=$PHX_BUILD_DIR/checkpoint/lib/.libs/libphalanx.so
	export TRAIN=$BATS_TEST_DIRNAME/../demo/train.py
	# node2 failed its memory test, node4 is slow (GEMM), the others are fine.
	export RESULTS=$BATS_TEST_DIRNAME/../data/check/lab-driver.json
	export JOB_NAME=phx-driver-daemon
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_CMD=${LAB_CMD:-$BATS_TEST_DIRNAME/lab}
	# act: true: a node declared lost would be set DOWN and the job
	# requeued, which is what the driver's report must prevent.
	ckptd_env phx-driver-daemon 17704 true
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$CKPTD_DIR/phalanx.yaml"
	cat >>"$CKPTD_DIR/phalanx.yaml" <<-YAML
		ckptd:
		  address: "$CKPTD_ADDR"
	YAML
	start_ckptd -c "$CKPTD_DIR/daemon.yaml"
}

# A killed node comes back for the next test; no job is left behind.
teardown()
{
	reset_nodes
}

teardown_file()
{
	local pid

	scancel --name="$JOB_NAME" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	[ -f "$CKPTD_DIR/daemon.log" ] && sed 's/^/# daemon: /' "$CKPTD_DIR/daemon.log" >&3
	[ -n "${CKPTD_DIR:-}" ] && rm -rf "$CKPTD_DIR"
}

# submit NODES [phalanx-launch options] -- COMMAND: a batch job whose
# script is the driver, with the daemon's configuration; sets JOB and OUT.
submit()
{
	local n=$1 script=$BATS_TEST_TMPDIR/job.sh
	shift
	driver_script --config "$CKPTD_DIR/phalanx.yaml" "$@" >"$script"
	sbatch_driver "$n" "$script"
}

daemon_has()
{
	grep -qs -- "$1" "$CKPTD_DIR/daemon.log"
}

show_out()
{
	show_job
	echo "--- daemon log:"
	cat "$CKPTD_DIR/daemon.log"
}

@test "a node killed under the driver: reported as dropped, relaunched on the spare, never requeued by the daemon" {
	mkdir -p "$BATS_TEST_TMPDIR/ckpt"
	submit 5 --spares 1 --nproc-per-node 2 -- /usr/bin/python3 "$TRAIN" --steps 150 \
		--ckpt-every 10 --step-sleep 0.05 --ckpt-dir "$BATS_TEST_TMPDIR/ckpt"
	wait_for 120 has 'step 20/150'
	[ "$(step_nodes 1)" = 'node[1-4]' ]
	# The agents heartbeat: the daemon would notice node3's silence.
	wait_for 30 daemon_has "job $JOB: its driver on"
	"$LAB_CMD" kill-node node3 >/dev/null
	wait_for 240 job_finished "$JOB"
	show_out
	[ "$(job_state "$JOB")" = COMPLETED ]
	[ "$(job_field "$JOB" Restarts)" = 0 ]
	has 'node node3 is bad'
	[ "$(step_nodes 2)" = 'node[1-2,4-5]' ]
	has '^phalanx: the job finished (1 relaunch(es))'
	has '^driver exit 0$'
	daemon_has "job $JOB: node node3 dropped by the job's driver, which relaunches without it"
	# The daemon may see node3's silence first: it leaves the job to the driver.
	if daemon_has "job $JOB: node node3 lost"; then
		daemon_has "job $JOB: not requeued: its driver relaunches it without node3"
	fi
	! daemon_has "job $JOB: node node[1245] lost"
	! daemon_has "job $JOB: requeued"
}

@test "recorded preflight under the driver: the failed node's check report reaches the daemon" {
	submit 5 --spares 1 --nproc-per-node 1 --preflight-results "$RESULTS" -- /bin/true
	wait_for 240 job_finished "$JOB"
	show_out
	[ "$(job_state "$JOB")" = COMPLETED ]
	[ "$(step_nodes 1)" = 'node[1,3-5]' ]
	daemon_has "job $JOB: node node2 failed the driver's preflight check (GPU 0: 3 words of a 1024 MiB memory test read back wrong"
	# phalanx status lists it untrusted, with the measured reason.
	run "$PHX" status --socket "$SOCK"
	echo "$output"
	[ "$status" -eq 0 ]
	echo "$output" | grep -q 'node2.*preflight check failed: GPU 0: 3 words'
	! echo "$output" | grep -q 'node[345].*preflight check failed'
}
