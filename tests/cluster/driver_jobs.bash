# SPDX-License-Identifier: Apache-2.0
#
# Helpers for the tests of phalanx-launch's driver mode: batch jobs whose
# script runs the driver, their output, and putting the lab's nodes back.
# The test file sets JOB_NAME, LAUNCH and LAB_CMD; submit helpers set JOB
# and OUT.

all_idle()
{
	[ -z "$(sinfo -h -N -o %T | grep -vx idle)" ]
}

# Cancels the tests' jobs, brings back dead nodes, resumes drained ones.
reset_nodes()
{
	scancel --name="$JOB_NAME" 2>/dev/null || true
	for n in $(sinfo -h -N -o %N | sort -u); do
		if node_not_responding "$n" || node_down "$n"; then
			"${LAB_CMD:-$BATS_TEST_DIRNAME/lab}" restart-node "$n" >/dev/null 2>&1 || true
		fi
		case $(node_state "$n") in
		drain*) scontrol update nodename="$n" state=resume || true ;;
		esac
	done
	wait_for 30 all_idle || true
}

# driver_script [phalanx-launch arguments]: the plain batch script, the
# driver ending it with its status, on stdout.
driver_script()
{
	echo '#!/bin/bash'
	echo 'export GLOO_SOCKET_IFNAME=eth0'
	printf '%q ' "$LAUNCH" "$@"
	echo
	echo 'rc=$?; echo "driver exit $rc"; exit $rc'
}

# every_tier_conf FILE LOCAL_DIR SHARED_DIR: the lab's phalanx.yaml with a
# save every 10 steps into every tier, 3 kept, into FILE; more YAML on
# stdin is appended (other sections).
every_tier_conf()
{
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$1"
	cat >>"$1"
	cat >>"$1" <<-YAML
		checkpoint:
		  keep: 3
		  interval: 10
		  local_dir: "$2"
		  local_every: 1
		  shared_dir: "$3"
		  shared_every: 1
	YAML
}

# sbatch_driver NODES SCRIPT: submits it; sets JOB and OUT. --no-kill: a
# node failure must not end the job, the driver handles it. SBATCH_EXTRA:
# more sbatch options.
sbatch_driver()
{
	local try err=$BATS_TEST_TMPDIR/sbatch.err before

	OUT=$BATS_TEST_TMPDIR/job.out
	before=$(slurm_query squeue -h -n "$JOB_NAME" -o %i | sort)
	# Slurm 24.11's slurmctld in the lab now and then answers nothing for
	# about 5 s after a node comes back (reset_nodes): sbatch times out, but
	# the controller may still take the job once it answers again. That job
	# is the one submitted (a second would run beside it); when there is
	# none, submitting again is what a user does.
	for try in 1 2 3; do
		# shellcheck disable=SC2086
		JOB=$(sbatch --parsable --no-kill --open-mode=append -J "$JOB_NAME" -N"$1" \
			-o "$OUT" ${SBATCH_EXTRA:-} "$2" 2>"$err") && break
		cat "$err" >&2
		grep -q 'Socket timed out' "$err" || return 1
		JOB=$(slurm_query squeue -h -n "$JOB_NAME" -o %i | sort |
			comm -13 <(echo "$before") - | tail -n 1)
		[ -z "$JOB" ] || break
		sleep 1
	done
	[ -n "$JOB" ]
}

has()
{
	grep -qs -- "$1" "$OUT"
}

# The node list of the driver's Nth "starting the step" line.
step_nodes()
{
	grep '^phalanx: starting the step on' "$OUT" | sed -n "${1}p" |
		sed 's/.* node(s) \([^ ]*\) .*/\1/'
}

restarts_are()
{
	[ "$(job_field "$JOB" Restarts)" = "$1" ]
}

show_job()
{
	echo "--- job $JOB output:"
	cat "$OUT"
	scontrol show job "$JOB" 2>/dev/null || true
}

# The PID of the agent running in node $1's namespace (not srun, whose
# command line names it too).
agent_pid()
{
	local p
	for p in $(ip netns pids "$(lab_netns "$1")"); do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^[^ ]*phalanx-launch --agent"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# procs_in_are I PATTERN N: N processes of node I have a command line matching PATTERN.
procs_in_are()
{
	[ "$(ip netns pids "$(lab_netns "$1")" | xargs -r ps -o args= -p | grep -c -- "$2")" -eq "$3" ]
}
