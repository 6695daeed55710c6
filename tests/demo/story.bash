# SPDX-License-Identifier: Apache-2.0
#
# The recovery story on a lab cluster, shared by the demo (tests/demo/run)
# and the recovery benchmark (tests/bench/recovery --spare): phalanx-ckptd
# on the host side of the lab, a PyTorch DDP job run by phalanx-launch's
# driver on 4 nodes plus a spare, saving through Phalanx (node-local tier
# and partner copies, no shared tier), one node killed mid-run, and the
# moments of the recovery read from the job's output as they appear.
#
# The caller sets build (the build folder), lab (tests/cluster/lab), top
# (the source tree) and dir (a scratch folder), and has a lab of
# STORY_NODES + 1 nodes up (default 4 + 1) with SLURM_CONF exported.
# STORY_WORKER (default: train.py, PyTorch DDP) and STORY_NPROC (default 2)
# choose the workers; tests/bench/recovery --light runs a light one.

story_now() { date +%s.%N; }
story_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Starts phalanx-ckptd with the lab's key and writes the job's phalanx.yaml.
story_daemon_start()
{
	local lab_dir id=${PHX_LAB_ID:-0}
	lab_dir=$(dirname "$(dirname "$SLURM_CONF")")
	STORY_ADDR=10.77.$id.1:$((17708 + 10 * id))
	# The lab's own metrics port: another daemon may hold the default.
	STORY_METRICS=127.0.0.1:$((17709 + 10 * id))
	STORY_SOCK=$dir/ckptd.sock
	cat >"$dir/daemon.yaml" <<-YAML
		recovery:
		  heartbeat_ms: 250
		  lost_after_ms: 2000
		  slurm_poll: 1
	YAML
	"$build/checkpoint/ckptd/phalanx-ckptd" -c "$dir/daemon.yaml" --listen "$STORY_ADDR" \
		--socket "$STORY_SOCK" --state-dir "$dir/ckptd" --key "$lab_dir/etc/phalanx.key" \
		--metrics "$STORY_METRICS" >>"$dir/daemon.log" 2>&1 &
	STORY_DAEMON=$!
	for _ in $(seq 100); do
		[ -S "$STORY_SOCK" ] && break
		sleep 0.1
	done
	[ -S "$STORY_SOCK" ] || return 1
	cp "$(dirname "$SLURM_CONF")/phalanx.yaml" "$dir/phalanx.yaml"
	# Inside node I the lab's nodetmp is node I's own directory.
	cat >>"$dir/phalanx.yaml" <<-YAML
		ckptd:
		  address: "$STORY_ADDR"
		checkpoint:
		  keep: 2
		  interval: 10
		  local_dir: "$lab_dir/nodetmp/phx-story-$id/%j/%n"
		  local_every: 1
		  partner: true
	YAML
}

story_daemon_stop()
{
	[ -n "${STORY_DAEMON:-}" ] && kill "$STORY_DAEMON" 2>/dev/null
	wait "${STORY_DAEMON:-}" 2>/dev/null
	STORY_DAEMON=
}

# story_submit STEPS: the driver's batch job; sets STORY_JOB and STORY_OUT.
story_submit()
{
	local worker=${STORY_WORKER:-/usr/bin/python3 $top/tests/demo/train.py --phalanx}

	STORY_OUT=$dir/job.out
	: >"$STORY_OUT"
	cat >"$dir/job.sh" <<-JOB
		#!/bin/bash
		export GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=$top/checkpoint/python
		export PHALANX_LIBRARY=$build/checkpoint/lib/.libs/libphalanx.so
		exec $build/launcher/phalanx-launch --config $dir/phalanx.yaml --spares 1 ${STORY_LAUNCH_OPTS:-} \\
			--nproc-per-node ${STORY_NPROC:-2} -- $worker \\
			--steps $1 --step-sleep 0.05 --mark-first
	JOB
	# --no-kill: a node's death must not end the job; the driver handles it.
	STORY_JOB=$(sbatch --parsable --no-kill -N$((${STORY_NODES:-4} + 1)) -J phx-story -o "$STORY_OUT" \
		--open-mode=append "$dir/job.sh") && story_watch
}

story_state() { scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

story_has() { grep -qs -- "$1" "$STORY_OUT"; }

# story_watch: records when each moment of the run first shows in the
# output into $dir/moments, until all were seen or story_unwatch. Each
# line is stamped as tail -F hands it over (inotify): polling the file
# with grep lagged by up to seconds on a loaded 2-core host with 32
# nodes, which the detection figure then carried. Started with the job:
# its first start is the floor.
story_watch()
{
	: >"$dir/moments"
	(
		local line mark seen=' ' relaunched= n=0 watcher=$BASHPID

		# Ends with this subshell (story_unwatch kills only that).
		tail -n +1 -F --pid="$watcher" "$STORY_OUT" 2>/dev/null |
			while IFS= read -r line; do
				story_mark "$line" "$relaunched" || continue
				mark=$STORY_MARK
				[ "$mark" = relaunch ] && relaunched=1
				[[ $seen == *" $mark "* ]] && continue
				seen+="$mark "
				echo "$mark $EPOCHREALTIME" >>"$dir/moments"
				n=$((n + 1))
				[ "$n" -lt 6 ] || break
			done
	) &
	STORY_WATCH=$!
}

# story_mark LINE RELAUNCHED: sets STORY_MARK to the moment a line of the
# output marks (no fork per line). A restore counts only once the relaunch
# was seen, not the first start's.
story_mark()
{
	case $1 in
	*'phalanx: starting the step on'*) STORY_MARK=start ;;
	*'first step from scratch done'*) STORY_MARK=fresh ;;
	*'phalanx: warning: node '*' is bad'* | *'phalanx: stopped step'*) STORY_MARK=detect ;;
	*'phalanx: warning: relaunching'*) STORY_MARK=relaunch ;;
	*'restoring checkpoint generation'*) [ -n "$2" ] && STORY_MARK=restore ;;
	*'first step after the restore done'*) STORY_MARK=step ;;
	*) return 1 ;;
	esac
}

story_unwatch()
{
	[ -n "${STORY_WATCH:-}" ] || return 0
	kill "$STORY_WATCH" 2>/dev/null
	wait "$STORY_WATCH" 2>/dev/null
	STORY_WATCH=
}

# For an exit trap: the watcher (which polls until every moment was seen)
# and the daemon, whatever state the story stopped in.
story_end()
{
	story_unwatch
	story_daemon_stop
}

story_moment() { awk -v m="$1" '$1 == m { print $2 }' "$dir/moments"; }

# The third node of the first step: not the one running rank 0.
story_victim()
{
	local list
	list=$(sed -n 's/^phalanx: starting the step on [0-9]* node(s) \([^ ]*\) .*/\1/p' "$STORY_OUT" | head -1)
	scontrol show hostnames "$list" | sed -n 3p
}

# story_kill NODE: kills it, waits for the job to end; sets STORY_KILL (the
# first SIGKILL: the lab's script takes seconds around it on a loaded host).
story_kill()
{
	STORY_KILL=$("$lab" kill-node "$1" | sed -n 's/^killed //p')
	[ -n "$STORY_KILL" ] || STORY_KILL=$(story_now)
	echo "kill $STORY_KILL" >>"$dir/moments"
	for _ in $(seq 3000); do
		case $(story_state "$STORY_JOB") in
		COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) break ;;
		esac
		sleep 0.1
	done
	sleep 0.2
	story_unwatch
}

# "detect relaunch restore first mttr floor": seconds from the kill to the
# driver seeing the node gone, from there to the relaunch on the spare,
# to every shard restored, to the first training step done (and the sum,
# MTTR), and the floor: the job's first start, step start to first step.
story_figures()
{
	local k=$STORY_KILL s f d r x t
	s=$(story_moment start) f=$(story_moment fresh) d=$(story_moment detect)
	r=$(story_moment relaunch) x=$(story_moment restore) t=$(story_moment step)
	[ -n "$s" ] && [ -n "$f" ] && [ -n "$d" ] && [ -n "$r" ] && [ -n "$x" ] && [ -n "$t" ] ||
		return 1
	echo "$(story_elapsed "$k" "$d") $(story_elapsed "$d" "$r") $(story_elapsed "$r" "$x")" \
		"$(story_elapsed "$x" "$t") $(story_elapsed "$k" "$t") $(story_elapsed "$s" "$f")"
}
