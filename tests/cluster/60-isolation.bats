#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# GPU isolation: each task sees only its job's fake GPUs ($LAB/dev/gpuN,
# character devices 195:N); the others are masked with /dev/null (1:3) in
# the task's own mount namespace, and so are their fake driver directories
# ($LAB/proc/driver/nvidia/gpus/BUS).

load lib

setup_file()
{
	require_lab
	LAB=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB
}

setup()
{
	lab_has_plugin || skip "the lab was brought up with --no-plugin"
	[ -c "$LAB/dev/gpu7" ] || skip "the lab has fewer than 8 GPUs per node"
}

teardown()
{
	if [ -f "$BATS_TEST_TMPDIR/phalanx.yaml" ]; then
		cp "$BATS_TEST_TMPDIR/phalanx.yaml" "$LAB/etc/phalanx.yaml"
	fi
	rm -rf "${LAB:?}/devlink" "${LAB:?}/userdev" "${LAB:?}/dev/gpu9" "${LAB:?}/sentinel" \
		"${LAB:?}"/proc/driver/nvidia/gpus/0000:f[ef]:00.0
	if [ -n "${shared_in:-}" ]; then
		nsenter -t "$shared_in" -m -r umount "$LAB/dev"
	fi
	if [ -n "${holder:-}" ]; then
		scancel "$holder" 2>/dev/null
		wait_for 30 job_finished "$holder"
	fi
}

# Run in a task with the lab directory as $1: one line saying which fake GPUs
# are real (195:N), which are masked (1:3), which driver directories are
# left, and what Slurm and the plugin set.
LIST='
real= masked= proc=
for f in "$1"/dev/gpu[0-7]; do
	n=${f##*/gpu}
	case $(stat -c %t:%T "$f") in
	"$(printf c3:%x "$n")") real=$real${real:+,}$n ;;
	1:3) masked=$masked${masked:+,}$n ;;
	esac
done
for f in "$1"/proc/driver/nvidia/gpus/*/information; do
	[ -r "$f" ] || continue
	proc=$proc${proc:+,}$(sed -n "s/^Device Minor:[[:space:]]*//p" "$f")
done
echo "task=${SLURM_LOCALID:-0} step=${SLURM_STEP_GPUS-} job=${SLURM_JOB_GPUS-}" \
	"cvd=${CUDA_VISIBLE_DEVICES-} real=$real masked=$masked proc=$proc"
'

# field LINE NAME: the value of NAME=... in a LIST line.
field()
{
	tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"
}

# The comma list, sorted, on one line.
sorted()
{
	split_sorted "$1" | paste -sd, -
}

count()
{
	split_sorted "$1" | grep -c .
}

# Position of GPU $1 in the sorted list $2: its CUDA number once the others are gone.
ordinal()
{
	split_sorted "$2" | sort -n | grep -nx "$1" | cut -d: -f1 | awk '{ print $1 - 1 }'
}

# A phalanx.yaml for one test; teardown puts the lab's back.
write_conf()
{
	[ -f "$BATS_TEST_TMPDIR/phalanx.yaml" ] ||
		cp "$LAB/etc/phalanx.yaml" "$BATS_TEST_TMPDIR/phalanx.yaml"
	cat >"$LAB/etc/phalanx.yaml"
}

# Holds GPUs 0-2 of node1, so the GPUs of the next job there are not 0..
hold_low_gpus()
{
	holder=$(sbatch --parsable -w node1 --gres=gpu:3 -o /dev/null --wrap 'sleep 120')
	[[ $holder =~ ^[0-9]+$ ]]
	wait_for 30 job_running "$holder"
}

slurmd_pid()
{
	read -r pid _ <"$LAB/pids/slurmd-$1" && echo "$pid"
}

# Mounts on the lab's fake GPUs and driver directories in a mount namespace.
gpu_mounts()
{
	awk -v dev="$LAB/dev/" -v proc="$LAB/proc/" \
		'index($5, dev) == 1 || index($5, proc) == 1' "/proc/$1/mountinfo" | grep -c .
}

@test "two jobs on one node each see only their own two GPUs" {
	dir=$BATS_TEST_TMPDIR/seen
	mkdir -p "$dir"
	# Each job writes what it sees, then waits (bounded) for the other: both
	# hold their GPUs at the same time.
	job='sh -c "$0" sh "$1" >"$2/$SLURM_JOB_ID"
	     n=0
	     while [ "$(ls "$2" | wc -l)" -lt 2 ]; do
		n=$((n + 1)); [ $n -lt 300 ] || exit 3; sleep 0.1
	     done'
	srun -N1 -w node1 --gres=gpu:2 sh -c "$job" "$LIST" "$LAB" "$dir" &
	a=$!
	srun -N1 -w node1 --gres=gpu:2 sh -c "$job" "$LIST" "$LAB" "$dir" &
	b=$!
	wait "$a"
	wait "$b"

	files=("$dir"/*)
	[ "${#files[@]}" -eq 2 ]
	one=$(cat "${files[0]}")
	two=$(cat "${files[1]}")
	echo "one: $one"
	echo "two: $two"
	for line in "$one" "$two"; do
		step=$(field "$line" step)
		[ "$(count "$step")" -eq 2 ]
		# Exactly its own GPUs are real devices, the other six are masked...
		[ "$(sorted "$(field "$line" real)")" = "$(sorted "$step")" ]
		[ "$(count "$(field "$line" masked)")" -eq 6 ]
		# ...and so are their driver directories.
		[ "$(sorted "$(field "$line" proc)")" = "$(sorted "$step")" ]
		# CUDA numbers what is left from 0.
		[ "$(field "$line" cvd)" = 0,1 ]
	done
	# Neither sees the other's GPUs.
	[ "$( (split_sorted "$(field "$one" real)"; split_sorted "$(field "$two" real)") |
	      sort -u | wc -l)" -eq 4 ]
	for g in $(split_sorted "$(field "$two" real)"); do
		split_sorted "$(field "$one" masked)" | grep -qx "$g"
	done
}

@test "--phx-isolate=task: each of two tasks sees exactly its own GPU" {
	run --separate-stderr srun -N1 -w node1 -n2 --gres=gpu:2 --phx-isolate=task \
		sh -c "$LIST" sh "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	step=$(field "${lines[0]}" step)
	[ "$(count "$step")" -eq 2 ]
	for line in "${lines[@]}"; do
		[ "$(count "$(field "$line" real)")" -eq 1 ]
		[ "$(field "$line" real)" = "$(field "$line" proc)" ]
		[ "$(count "$(field "$line" masked)")" -eq 7 ]
		[ "$(field "$line" cvd)" = 0 ]
	done
	# Different GPUs, and together the step's.
	[ "$( (field "${lines[0]}" real; field "${lines[1]}" real) | sort -n | paste -sd, -)" = \
	  "$(sorted "$step")" ]
}

@test "job mode keeps the step's GPUs for every task; Slurm's per-task binding is renumbered" {
	hold_low_gpus
	run --separate-stderr srun -N1 -w node1 -n2 --gpus-per-task=1 sh -c "$LIST" sh "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	real=$(field "${lines[0]}" real)
	[ "$(count "$real")" -eq 2 ]
	for line in "${lines[@]}"; do
		# Both tasks see both GPUs (NCCL P2P, CUDA IPC)...
		[ "$(field "$line" real)" = "$real" ]
		# ...and Slurm bound each to one (SLURM_STEP_GPUS is per task now),
		# whose CUDA number is its place among the GPUs left.
		own=$(field "$line" step)
		[ "$(count "$own")" -eq 1 ]
		[ "$(field "$line" cvd)" = "$(ordinal "$own" "$real")" ]
	done
	# The holder has the low GPUs: the numbers really changed.
	[ "$(field "${lines[0]}" step),$(field "${lines[1]}" step)" != 0,1 ]
}

@test "--phx-isolate=off sees all eight GPUs, numbered by Slurm" {
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 --phx-isolate=off \
		sh -c "$LIST" sh "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "$(field "$output" real)" = 0,1,2,3,4,5,6,7 ]
	[ -z "$(field "$output" masked)" ]
	[ "$(field "$output" proc)" = 0,1,2,3,4,5,6,7 ]
	[ "$(field "$output" cvd)" = "$(field "$output" step)" ]
}

@test "a step without GPUs sees none" {
	run --separate-stderr srun -N1 -w node1 sh -c "$LIST" sh "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ -z "$(field "$output" real)" ]
	[ "$(count "$(field "$output" masked)")" -eq 8 ]
	[ -z "$(field "$output" proc)" ]
	[ -z "$(field "$output" cvd)" ]
}

@test "the batch script believes SLURM_JOB_GPUS, never a SLURM_STEP_GPUS the user set" {
	out=$BATS_TEST_TMPDIR/batch.out
	run --separate-stderr env SLURM_STEP_GPUS=0-7 sbatch --parsable -w node1 --gres=gpu:2 \
		-o "$out" --wrap "sh -c '$LIST' sh '$LAB'"
	show_run
	[ "$status" -eq 0 ]
	job=${output%%;*}
	wait_for 60 job_finished "$job"
	[ "$(job_state "$job")" = COMPLETED ]
	line=$(cat "$out")
	echo "$line"
	[ "$(field "$line" step)" = 0-7 ]
	[ "$(count "$(field "$line" job)")" -eq 2 ]
	[ "$(sorted "$(field "$line" real)")" = "$(sorted "$(field "$line" job)")" ]
	[ "$(count "$(field "$line" masked)")" -eq 6 ]
}

@test "a masked GPU cannot be opened, not even by root; the job's own can" {
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 sh -c \
		'id -u; for f in "$1"/dev/gpu[0-7]; do (exec 3<"$f") 2>&1 | sed "s/.*: //"; done' \
		sh "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	# A fake GPU has no driver: opening the job's own gives ENXIO.
	[ "$(printf '%s\n' "${lines[@]}" | grep -c 'No such device or address')" -eq 2 ]
	[ "$(printf '%s\n' "${lines[@]}" | grep -c 'Permission denied')" -eq 6 ]
}

@test "an unprivileged job cannot open or unmount the masks" {
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	run --separate-stderr setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		srun -N1 -w node1 --chdir=/ --gres=gpu:2 sh -c \
		'id -u; sh -c "$0" sh "$1"; (exec 3<"$1/dev/$2") 2>&1; umount "$1/dev/$2" 2>&1
		 stat -c %t:%T "$1/dev/$2"' "$LIST" "$LAB" gpu7
	show_run
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$(id -u nobody)" ]
	[ "$(count "$(field "${lines[1]}" real)")" -eq 2 ]
	[ "$(count "$(field "${lines[1]}" masked)")" -eq 6 ]
	# gpu7 is not among the first two GPUs Slurm hands out on an idle node.
	grep -q 'gpu7: Permission denied' <<<"$output"
	grep -q 'must be superuser' <<<"$output"
	[ "${lines[-1]}" = 1:3 ]
}

# Run as each of two tasks with the lab as $1 and a meeting directory as $2:
# a task finds the other's process and opens the other's GPU through
# /proc/PID/root, where the other's mount namespace does not mask it.
SIBLING='
me=${SLURM_LOCALID:?} other=$((1 - SLURM_LOCALID))
for f in "$1"/dev/gpu[0-7]; do
	[ "$(stat -c %t "$f")" = c3 ] && mine=${f##*/gpu}
done
echo "$$ $mine" >"$2/task$me.tmp" && mv "$2/task$me.tmp" "$2/task$me"
i=0; while [ ! -f "$2/task$other" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
read -r pid gpu <"$2/task$other"
theirs=$( (exec 3<"/proc/$pid/root$1/dev/gpu$gpu") 2>&1 | sed "s/.*: //")
own=$( (exec 3<"/proc/self/root$1/dev/gpu$mine") 2>&1 | sed "s/.*: //")
echo "task=$me job=$SLURM_JOB_ID mine=$mine theirs=$gpu via=$(stat -c %t:%T "/proc/$pid/root$1/dev/gpu$gpu")"
echo "task=$me theirs: $theirs"
echo "task=$me own: $own"
touch "$2/done$me"
i=0; while [ ! -f "$2/done$other" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
'

@test "--phx-isolate=task: a task cannot open its sibling's GPU through /proc/PID/root" {
	id nobody >/dev/null 2>&1 || skip "no user 'nobody'"
	meet=$(mktemp -d)
	chmod 0777 "$meet"
	run --separate-stderr setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
		srun -N1 -w node1 --chdir=/ -n2 --gres=gpu:2 --phx-isolate=task \
		sh -c "$SIBLING" sh "$LAB" "$meet"
	rm -rf "$meet"
	show_run
	[ "$status" -eq 0 ]
	for t in 0 1; do
		line=$(grep "^task=$t job=" <<<"$output")
		# The sibling's GPU is there to see, unmasked, in its namespace ...
		[ "$(field "$line" via)" = "c3:$(printf %x "$(field "$line" theirs)")" ]
		[ "$(field "$line" mine)" != "$(field "$line" theirs)" ]
		# ... but the kernel refuses it; the task's own opens (ENXIO: no driver).
		grep -qx "task=$t theirs: Operation not permitted" <<<"$output"
		grep -qx "task=$t own: No such device or address" <<<"$output"
	done
	# The tasks' filter cgroups are gone with the step.
	job=$(field "$line" job)
	! compgen -G "/sys/fs/cgroup/unified/phalanx-$job.*" >/dev/null
	! compgen -G "/sys/fs/cgroup/phalanx-$job.*" >/dev/null
}

@test "the masks live in the task's namespace only; the host's GPUs are untouched" {
	dir=$BATS_TEST_TMPDIR/ns
	mkdir -p "$dir"
	slurmd=$(slurmd_pid node1)
	[ -n "$slurmd" ]
	srun -N1 -w node1 --gres=gpu:2 sh -c \
		'echo $$ >"$2/pid.tmp" && mv "$2/pid.tmp" "$2/pid"
		 n=0; while [ ! -e "$2/go" ]; do n=$((n + 1)); [ $n -lt 300 ] || exit 3; sleep 0.1; done' \
		sh "$LAB" "$dir" &
	job=$!
	wait_for 30 test -s "$dir/pid"
	task=$(cat "$dir/pid")
	# The task has 6 device masks and 6 driver directory masks...
	[ "$(gpu_mounts "$task")" -eq 12 ]
	# ...its node (slurmd's namespace) and the host have none.
	[ "$(gpu_mounts "$slurmd")" -eq 0 ]
	[ "$(gpu_mounts self)" -eq 0 ]
	[ "$(readlink "/proc/$task/ns/mnt")" != "$(readlink "/proc/$slurmd/ns/mnt")" ]
	touch "$dir/go"
	wait "$job"

	[ "$(gpu_mounts "$slurmd")" -eq 0 ]
	for i in 0 1 2 3 4 5 6 7; do
		[ "$(stat -c '%F %t:%T %U' "$LAB/dev/gpu$i")" = \
		  "character special file c3:$(printf %x "$i") root" ]
	done
	[ "$(ls "$LAB"/proc/driver/nvidia/gpus/*/information | wc -l)" -eq 8 ]
	wait_for 30 node_idle node1
}

@test "nothing propagates back to the node, even from a shared mount" {
	slurmd=$(slurmd_pid node1)
	[ -n "$slurmd" ]
	# In node1's namespace, the GPU directory becomes a shared mount: a
	# task's copy of it would send its masks back, were / not made a slave.
	nsenter -t "$slurmd" -m -r sh -c 'mount --bind "$1" "$1" && mount --make-shared "$1"' \
		sh "$LAB/dev"
	shared_in=$slurmd
	grep -q " $LAB/dev .*shared:" "/proc/$slurmd/mountinfo"
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 sh -c \
		'sh -c "$0" sh "$1"; grep -c " $1/dev/gpu" /proc/self/mountinfo' "$LIST" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "$(count "$(field "${lines[0]}" masked)")" -eq 6 ]
	[ "${lines[1]}" -eq 6 ]
	# Without the slave, the 6 masks would show up here (checked by hand with
	# 'unshare --propagation unchanged').
	[ "$(gpu_mounts "$slurmd")" -eq 0 ]
	[ "$(gpu_mounts self)" -eq 0 ]
}

@test "--phx-isolate=off is refused where isolation.allow_off is false" {
	write_conf <<EOF
isolation:
  allow_off: false
  proc_root: "$LAB/proc"
health:
  enabled: false
  gpu_device: "$LAB/dev/gpu%u"
EOF
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 --phx-isolate=off true
	show_run
	[ "$status" -ne 0 ]
	grep -q 'phalanx: isolation: --phx-isolate=off is not allowed.*isolation.allow_off' \
		<<<"$stderr"
	run --separate-stderr env PHX_ISOLATE=off srun -N1 -w node1 --gres=gpu:2 true
	show_run
	[ "$status" -ne 0 ]
	grep -q 'phalanx: isolation: --phx-isolate=off is not allowed' <<<"$stderr"
	# The site's own default stays possible.
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 --phx-isolate=task true
	[ "$status" -eq 0 ]
	wait_for 30 node_idle node1
}

@test "a symlink on the GPU device path is never followed: the task is refused" {
	ln -s "$LAB/dev" "$LAB/devlink"
	write_conf <<EOF
isolation:
  proc_root: "$LAB/proc"
health:
  enabled: false
  gpu_device: "$LAB/devlink/gpu%u"
EOF
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 sh -c "$LIST" sh "$LAB"
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: isolation: .*'devlink' is a symlink, which is never followed" <<<"$stderr"
	[ -z "$output" ]
	wait_for 30 node_idle node1
}

@test "a GPU directory others may write to is refused" {
	mkdir -m 0777 "$LAB/userdev"
	for i in 0 1 2 3; do
		mknod -m 0666 "$LAB/userdev/gpu$i" c 195 "$i"
	done
	write_conf <<EOF
isolation:
  proc_root: "$LAB/proc"
health:
  enabled: false
  gpu_device: "$LAB/userdev/gpu%u"
EOF
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: isolation: .*directory 'userdev' on the way is not owned by root" \
		<<<"$stderr"
	# Owned by a user: the same.
	chmod 0755 "$LAB/userdev"
	chown nobody "$LAB/userdev"
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 true
	[ "$status" -ne 0 ]
	grep -q "directory 'userdev' on the way is not owned by root" <<<"$stderr"
	# And the driver directories are held to the same rule.
	chown root "$LAB/userdev"
	ln -s "$LAB/proc" "$LAB/devlink"
	write_conf <<EOF
isolation:
  proc_root: "$LAB/devlink"
health:
  enabled: false
  gpu_device: "$LAB/dev/gpu%u"
EOF
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: isolation: .*'devlink' is a symlink" <<<"$stderr"
}

@test "a symlink in place of a GPU device file is left alone, and so is its target" {
	printf 'untouched\n' >"$LAB/sentinel"
	ln -s "$LAB/sentinel" "$LAB/dev/gpu9"
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 sh -c \
		'sh -c "$0" sh "$1"; stat -c %F "$1/sentinel"; cat "$1/dev/gpu9"
		 grep -c -e " $1/sentinel " -e " $1/dev/gpu9 " /proc/self/mountinfo || :' \
		"$LIST" "$LAB"
	show_run
	[ "$status" -eq 0 ]
	[ "$(count "$(field "${lines[0]}" real)")" -eq 2 ]
	[ "${lines[1]}" = "regular file" ]
	[ "${lines[2]}" = untouched ]
	[ "${lines[3]}" = 0 ]
	grep -q "phalanx: warning: isolation: $LAB/dev/gpu9 is not a character device owned by root" \
		<<<"$stderr"
	[ "$(cat "$LAB/sentinel")" = untouched ]
}

@test "a driver directory without a minor is hidden; a symlink there is left alone" {
	gpus=$LAB/proc/driver/nvidia/gpus
	mkdir "$gpus/0000:ff:00.0"
	echo 'Model: odd' >"$gpus/0000:ff:00.0/information"
	mkdir -p "$LAB/sentinel"
	echo 'Device Minor: 0' >"$LAB/sentinel/information"
	ln -s "$LAB/sentinel" "$gpus/0000:fe:00.0"
	run --separate-stderr srun -N1 -w node1 --gres=gpu:2 sh -c \
		'ls "$1/0000:ff:00.0" | wc -l; cat "$1/0000:fe:00.0/information"' sh "$gpus"
	show_run
	[ "$status" -eq 0 ]
	[ "${lines[0]}" -eq 0 ]
	[ "${lines[1]}" = 'Device Minor: 0' ]
	grep -q "phalanx: warning: isolation: no 'Device Minor' in $gpus/0000:ff:00.0" <<<"$stderr"
	grep -q "phalanx: warning: isolation: $gpus/0000:fe:00.0 is not a directory owned by root" \
		<<<"$stderr"
}

@test "bad isolation values and config are refused with a reason; slurmd lives on" {
	slurmd=$(slurmd_pid node1)
	run --separate-stderr srun -N1 -w node1 --phx-isolate=bogus true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: --phx-isolate='bogus' is not known; use job, task or off" <<<"$stderr"
	run --separate-stderr env PHX_ISOLATE=jobs srun -N1 -w node1 true
	[ "$status" -ne 0 ]
	grep -q "phalanx: --phx-isolate='jobs' is not known" <<<"$stderr"

	write_conf <<EOF
isolation:
  mode: sometimes
EOF
	run --separate-stderr srun -N1 -w node1 true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: .*phalanx.yaml:2:9: key 'isolation.mode': expected one of job, task, off" \
		<<<"$stderr"
	write_conf <<EOF
isolation:
  proc_root: proc
health:
  gpu_device: "$LAB/dev/gpu"
EOF
	run --separate-stderr srun -N1 -w node1 true
	show_run
	[ "$status" -ne 0 ]
	grep -q "phalanx: .*key 'isolation.proc_root': expected an absolute path" <<<"$stderr"

	kill -0 "$slurmd"
	wait_for 30 node_idle node1
}
