#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
#
# Recovery by phalanx-ckptd (daemon on the host side of the lab, simulated
# agents in the nodes, tests/bench/ckpt_sim train, heartbeating with the
# job token the plugin minted): a killed node is declared lost from its
# missing heartbeats, drained with Phalanx's reason, and the job requeued
# without it and eligible at once; the goodput ledger accounts for every
# second; a drained node returns to service after a passing check only; a
# repeated identical crash stops the job; recovery.max_requeues holds.

load lib

setup_file()
{
	require_lab
	lab_has_plugin || skip "the lab was brought up with --no-plugin (no job tokens)"
	export LAB_DIR=$(dirname "$(dirname "$SLURM_CONF")")
	export LAB_CMD=${LAB_CMD:-$BATS_TEST_DIRNAME/lab}
	export CKPTD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/phx-recovery-lab.XXXXXX")
	chmod 0755 "$CKPTD_DIR"
	export CKPTD_ADDR=10.77.${PHX_LAB_ID:-0}.1:$((17702 + 10 * ${PHX_LAB_ID:-0}))
	export CKPTD_METRICS=127.0.0.1:$((17703 + 10 * ${PHX_LAB_ID:-0}))
	export SIM=$PHX_BUILD_DIR/tests/bench/ckpt_sim
	export PHX=$PHX_BUILD_DIR/cli/phalanx
	export SOCK=$CKPTD_DIR/ckptd.sock
	# drain_after 3: a check failure drops a node without draining it, so
	# the max_requeues test does not use up the lab's nodes.
	cat >"$CKPTD_DIR/phalanx.yaml" <<-YAML
		recovery:
		  heartbeat_ms: 250
		  lost_after_ms: 2000
		  slurm_poll: 1
		  user_error_repeats: 2
		  drain_after: 3
		  max_requeues: 2
		ckptd:
		  max_ranks_per_user: 3000
	YAML
	# NODES, then ckpt_sim train options for every node.
	cat >"$CKPTD_DIR/train.sh" <<-'SH'
		#!/bin/bash
		nodes=$1
		shift
		exec srun -N"$nodes" --ntasks-per-node=1 bash -c \
			'exec "$0" train --address "$1" --token "$PHALANX_JOB_TOKEN" \
				--job "$SLURM_JOB_ID" --uid "$(id -u)" --job-nodes "$SLURM_NNODES" \
				--first-node "$SLURM_NODEID" --node-name "$SLURMD_NODENAME" \
				--timeout 30 "${@:2}"' "$SIM" "$CKPTD_ADDR" "$@"
	SH
	chmod 0755 "$CKPTD_DIR/train.sh"
	start_ckptd -c "$CKPTD_DIR/phalanx.yaml"
}

teardown_file()
{
	local pid n

	scancel --user="$(id -un)" 2>/dev/null
	pid=$(cat "$CKPTD_DIR/pid" 2>/dev/null) && kill "$pid" 2>/dev/null
	for n in $(sinfo -h -N -o %N | sort -u); do
		node_state "$n" | grep -q '^down' && "$LAB_CMD" restart-node "$n" >/dev/null 2>&1
		node_state "$n" | grep -q '^drain' && scontrol update nodename="$n" state=resume
	done
	[ -f "$CKPTD_DIR/daemon.log" ] && sed 's/^/# daemon: /' "$CKPTD_DIR/daemon.log" >&3
	[ -n "${CKPTD_DIR:-}" ] && rm -rf "$CKPTD_DIR"
}

gp()
{
	"$PHX" goodput "$1" --json --socket "$SOCK"
}

gp_field()
{
	gp "$1" | jq -r "$2"
}

phase_is()
{
	[ "$(gp_field "$1" .phase 2>/dev/null)" = "$2" ]
}

agents_of()
{
	"$PHX" status --json --socket "$SOCK" | jq -r ".jobs[] | select(.job == $1) | .agents"
}

# agents_are JOB N: JOB has N agents connected now.
agents_are()
{
	[ "$(agents_of "$1")" = "$2" ]
}

committed_some()
{
	[ "$("$PHX" status --json --socket "$SOCK" |
		jq -r ".jobs[] | select(.job == $1) | .committed")" -ge 1 ] 2>/dev/null
}

stopped()
{
	[ "$(gp_field "$1" .stopped 2>/dev/null)" = true ]
}

training_on()
{
	[ "$(agents_of "$1")" = "$2" ] && phase_is "$1" run
}

# The parts of the ledger add up to its wall time (to the printed precision).
parts_add_up()
{
	gp "$1" | jq -e '([.parts[]] | add) - .wall | (if . < 0 then -. else . end) < 0.001'
}

@test "a killed node: lost, drained with Phalanx's reason, the job requeued without it and running at once" {
	local job victim t_kill nodes

	job=$(sbatch --parsable -N2 --requeue --open-mode=append -o "$CKPTD_DIR/lost.out" \
		"$CKPTD_DIR/train.sh" 2)
	wait_for 60 training_on "$job" 2
	victim=$(scontrol show hostnames "$(job_field "$job" NodeList)" | tail -n 1)
	# A generation committed before the kill, so that lost work is measured.
	wait_for 30 committed_some "$job"
	"$LAB_CMD" kill-node "$victim"
	t_kill=$(date +%s.%N)
	wait_for 30 grep -q "node $victim lost" "$CKPTD_DIR/daemon.log"
	run gp "$job"
	show_run
	[ "$(jq -r .lost_agents <<<"$output")" = 1 ]
	# Drained (and down) with Phalanx's reason, for an administrator to see.
	run sinfo -h -n "$victim" -o '%E'
	show_run
	[[ "$output" == "phalanx: node $victim lost (no agent heartbeat)"* ]]
	[[ "$(node_state "$victim")" == drain* || "$(node_state "$victim")" == down* ]]
	# Requeued without the node and eligible now, not after Slurm's two minutes.
	wait_for 60 training_on "$job" 2
	[ "$(job_field "$job" Restarts)" = 1 ]
	nodes=$(scontrol show hostnames "$(job_field "$job" NodeList)")
	! grep -qx "$victim" <<<"$nodes"
	# Prometheus sees the fault and Phalanx's drain of that node, and the new run's nodes.
	run curl -sf "http://$CKPTD_METRICS/metrics"
	[ "$status" -eq 0 ]
	grep -q "^phalanx_ckptd_node_faults_total{node=\"$victim\"} [1-9]" <<<"$output"
	grep -q "^phalanx_ckptd_node_drained{node=\"$victim\"} 1$" <<<"$output"
	grep -q "^phalanx_ckptd_job_nodes_lost_total{job=\"$job\"} 1$" <<<"$output"
	wait_for 20 heartbeat_metric "$job" "$(head -n 1 <<<"$nodes")"
	[[ "$(job_field "$job" ExcNodeList)" == *"$victim"* ]]
	# Slurm's own record: eligible again at the requeue, not held for its 121 s.
	[ "$(date -d "$(job_field "$job" EligibleTime)" +%s)" -lt $((${t_kill%.*} + 100)) ]
	run gp "$job"
	show_run
	[ "$(jq -r .requeues <<<"$output")" = 1 ]
	jq -e '.parts.detection > 0 and .parts.queue > 0 and .parts.restart > 0 and
		.parts.productive > 0 and .parts.checkpoint_stall > 0' <<<"$output"
	parts_add_up "$job"
	"$PHX" goodput "$job" --socket "$SOCK" | sed 's/^/# /' >&3
	printf '# detection %s s (lost_after 2 s), requeue to running %s s, kill to running %.2f s\n' \
		"$(jq -r .detect_last <<<"$output")" "$(jq -r .queue_last <<<"$output")" \
		"$(echo "$(date +%s.%N) - $t_kill" | bc)" >&3
	# The node comes back, but stays drained until a check passes on it.
	"$LAB_CMD" restart-node "$victim"
	run node_state "$victim"
	[[ "$output" == drain* ]]
	"$PHX" status --socket "$SOCK" | grep -q "^  $victim "
	# What the job's driver reports from its preflight of the node, over the
	# link of one of the job's nodes: a check of a node drained for this job.
	"$SIM" report --address "$CKPTD_ADDR" --key "$LAB_DIR/etc/phalanx.key" --job "$job" \
		--uid "$(id -u)" --job-nodes 2 --first-node 1 --node-name "$(head -n 1 <<<"$nodes")" \
		--report check --report-node "$victim" --report-value 1
	wait_for 10 node_idle "$victim"
	! "$PHX" status --socket "$SOCK" | grep -q "^  $victim "
	curl -sf "http://$CKPTD_METRICS/metrics" | grep -q "^phalanx_ckptd_node_drained{node=\"$victim\"} 0$"
	scancel "$job"
}

# heartbeat_metric JOB NODE: the daemon exports how long ago NODE's agent of JOB was heard.
heartbeat_metric()
{
	curl -sf "http://$CKPTD_METRICS/metrics" |
		grep -Eq "^phalanx_ckptd_node_heartbeat_age_seconds\{job=\"$1\",node=\"$2\"\} [0-9.]+$"
}

# status_line JOB: phalanx status's line on the job's recovery, "" when none.
status_line()
{
	"$PHX" status --socket "$SOCK" | grep "^job $1: " || true
}

waits_for_nodes()
{
	[[ "$(status_line "$1")" == "job $1: requeued: "*"the job waits until enough are back" ]] &&
		[ "$(job_state "$1")" = PENDING ]
}

@test "a requeue that would leave the partition too small waits for the lost node instead of excluding it" {
	local job victim n

	# The whole lab: excluding the lost node would leave n - 1 nodes for a job of n, forever.
	n=$(sinfo -h -N -o %N | sort -u | wc -l)
	job=$(sbatch --parsable -N"$n" --requeue --open-mode=append -o "$CKPTD_DIR/all.out" \
		"$CKPTD_DIR/train.sh" "$n")
	wait_for 60 training_on "$job" "$n"
	victim=$(scontrol show hostnames "$(job_field "$job" NodeList)" | tail -n 1)
	"$LAB_CMD" kill-node "$victim"
	wait_for 60 waits_for_nodes "$job"
	status_line "$job" | sed 's/^/# /' >&3
	[ "$(job_field "$job" ExcNodeList)" = "(null)" ]
	grep -q "job $job: .*, $n needed: requeued leaving the 1 DOWN or drained one(s) to Slurm" \
		"$CKPTD_DIR/daemon.log"
	# Back, and resumed by the administrator (a pending job has no token that
	# speaks for a node): the job runs on every node again.
	"$LAB_CMD" restart-node "$victim"
	scontrol update nodename="$victim" state=resume
	wait_for 90 training_on "$job" "$n"
	[ "$(job_field "$job" Restarts)" = 1 ]
	scancel "$job"
	wait_for 30 job_finished "$job"
}

@test "the same crash twice is a user error: the job stops, not requeued, and says why" {
	local job

	job=$(sbatch --parsable -N1 --requeue -o /dev/null "$CKPTD_DIR/train.sh" 1 \
		--report 'crash:ValueError: bad label at step 5' --report-at 5 --report-times 2)
	wait_for 60 stopped "$job"
	run gp "$job"
	show_run
	jq -e '.stopped and .requeues == 0 and .restarts == 1 and .phase == "done"' <<<"$output"
	[[ "$(jq -r .reason <<<"$output")" == "user error: the same failure (ValueError: bad label at step 5) 2 times"* ]]
	wait_for 30 job_finished "$job"
	[ "$(job_state "$job")" = CANCELLED ]
	[ "$(job_field "$job" Restarts)" = 0 ]
	parts_add_up "$job"
	grep -q "job $job: stopped: user error" "$CKPTD_DIR/daemon.log"
}

@test "recovery.max_requeues: the third node fault stops the job, saying why" {
	local job

	# Every run's node fails its check at step 3: requeue, requeue, give up.
	job=$(sbatch --parsable -N1 --requeue -o /dev/null "$CKPTD_DIR/train.sh" 1 \
		--report 'check:gpu 1 missing' --report-at 3)
	wait_for 90 stopped "$job"
	run gp "$job"
	show_run
	jq -e '.requeues == 2 and .stopped' <<<"$output"
	[[ "$(jq -r .reason <<<"$output")" == "gave up after 2 requeues (recovery.max_requeues)"* ]]
	# Two runs' nodes excluded; the third run's failure is named in the reason.
	[ "$(tr ',' '\n' <<<"$(jq -r .exclude <<<"$output")" | sort -u | wc -l)" = 2 ]
	[[ "$(jq -r .reason <<<"$output")" == *"check failure: gpu 1 missing"* ]]
	wait_for 30 job_finished "$job"
	[ "$(job_field "$job" Restarts)" = 2 ]
	parts_add_up "$job"
}

# The daemon's peak memory in KiB.
ckptd_hwm()
{
	awk '$1 == "VmHWM:" { print $2 }' "/proc/$(cat "$CKPTD_DIR/pid")/status"
}

@test "attack: no token, a 32 MiB frame and 100 idle connections: refused cheaply, no node lost" {
	local job out lost_before hwm_before

	job=$(sbatch --parsable -N2 -o /dev/null "$CKPTD_DIR/train.sh" 2 --seconds 20)
	wait_for 60 training_on "$job" 2
	lost_before=$(grep -c ' lost' "$CKPTD_DIR/daemon.log" || true)
	hwm_before=$(ckptd_hwm)
	run /usr/bin/python3 "$BATS_TEST_DIRNAME/../security/preauth_flood.py" "$CKPTD_ADDR" 100
	show_run
	[ "$status" -eq 0 ]
	# Before: the whole frame was read and parsed (4.4 s, 1.15 GiB) before the
	# stage was checked. Now the header alone ends it.
	[ "$(awk '$1 == "big_sent" { print $2 }' <<<"$output")" -lt $((32 << 20)) ]
	grep -q 'frame of 33554432 bytes; frames hold 1 to 4096 bytes' "$CKPTD_DIR/daemon.log"
	# At most 64 unauthenticated connections per address: the rest dropped
	# at once; the others closed by the 5-second deadline to authenticate.
	[ "$(awk '$1 == "idle_dropped" { print $2 }' <<<"$output")" -ge 37 ]
	[ "$(awk '$1 == "idle_open_after" { print $2 }' <<<"$output")" -eq 0 ]
	echo "# attack: $(tr '\n' ' ' <<<"$output"); daemon VmHWM ${hwm_before} -> $(ckptd_hwm) KiB" >&3
	[ $(($(ckptd_hwm) - hwm_before)) -lt $((16 << 10)) ]
	# The job trained on: no node of it declared lost.
	[ "$(agents_of "$job")" = 2 ]
	[ "$(grep -c ' lost' "$CKPTD_DIR/daemon.log")" = "$lost_before" ]
	run curl -sf "http://$CKPTD_METRICS/metrics"
	grep -q '^phalanx_ckptd_preauth_refused_total [1-9]' <<<"$output"
	scancel "$job"
	wait_for 30 job_finished "$job"
}

# holder JOB NODE ARGS...: tests/security/token_holder.py run in a step of
# JOB on NODE, with that job's token; ARGS from its ROLE on.
holder()
{
	local job=$1 node=$2
	shift 2
	srun --jobid="$job" --overlap -N1 -w "$node" bash -c \
		'exec /usr/bin/python3 "$0" "$1" "$SLURM_JOB_ID" "$(id -u)" "$PHALANX_JOB_TOKEN" "${@:2}"' \
		"$BATS_TEST_DIRNAME/../security/token_holder.py" "$CKPTD_ADDR" "$@"
}

reason_of()
{
	sinfo -h -N -n "$1" -o %E | head -n 1
}

@test "attack: a job's token speaks only for that job's nodes, and only while the job runs" {
	local job old old_token xid3 xid_all health n

	# A token of a job that has ended.
	old=$(sbatch --parsable -N1 -w node1 -o /dev/null --wrap 'sleep 300')
	wait_for 60 job_running "$old"
	old_token=$(srun --jobid="$old" --overlap -N1 printenv PHALANX_JOB_TOKEN)
	[ ${#old_token} -eq 64 ]
	scancel "$old"
	wait_for 30 job_finished "$old"
	job=$(sbatch --parsable -N2 -w node1,node2 -o /dev/null --wrap 'sleep 300')
	wait_for 60 job_running "$job"

	# Before: any name was taken, and a host list spoke for every node in it.
	run holder "$job" node1 agent 'node[1-4]'
	show_run
	[[ "$output" == "refused "*"is not a node name"* ]]
	run holder "$job" node1 agent node3
	show_run
	[[ "$output" == "refused "*"node node3 is not in job $job's allocation"* ]]
	# Before: 2^20 ranks were taken on a job's word, and each prepare then
	# cost the daemon 360 MB. Now the shape must fit the job's allocation.
	run holder "$job" node1 agent:1:1048576 node1
	show_run
	[[ "$output" == "closed "*"1048576 ranks, but job $job's 2 node(s) run at most 2048"* ]]
	run holder "$job" node1 agent:3:3 node1
	show_run
	[[ "$output" == "closed "*"3 nodes, but job $job has 2 in Slurm"* ]]
	# The job's own node is its agent's to speak for.
	run holder "$job" node1 agent node1
	show_run
	[ "$output" = open ]

	# Before: two xid events naming a host list marked every node in it for
	# draining. Now events about nodes outside the job are dropped.
	xid3='{"kind": "xid", "node": "node3", "value": 79, "reason": "Xid 79"}'
	xid_all='{"kind": "xid", "node": "node[1-4]", "value": 79, "reason": "Xid 79"}'
	run holder "$job" node1 agent node1 "$xid3" "$xid3" "$xid_all" "$xid_all" \
		'{"kind": "node_bad", "node": "node4"}'
	show_run
	[ "$output" = open ]
	[ "$(grep -c "job $job: event .* ignored: .*node3\|job $job: event .* ignored: .*not a node name\|job $job: event .* ignored: .*node4" "$CKPTD_DIR/daemon.log")" -eq 5 ]

	# Before: a driver's failing then passing check resumed a node the
	# health prolog had drained. Now only this daemon's drain for the job is undone.
	health='phalanx: health: gpu: 7 of 8 GPUs visible'
	scontrol update nodename=node2 state=drain reason="$health"
	run holder "$job" node1 driver node1 \
		'{"kind": "check", "node": "node2", "value": 0, "reason": "forged"}' \
		'{"kind": "check", "node": "node2", "value": 1}' \
		'{"kind": "check", "node": "node3", "value": 0, "reason": "forged"}'
	show_run
	[ "$output" = open ]
	grep -q "node node2 keeps its state in Slurm (reason \"$health\"): job $job did not drain it" \
		"$CKPTD_DIR/daemon.log"
	[[ "$(node_state node2)" == drain* ]]
	[ "$(reason_of node2)" = "$health" ]
	scontrol update nodename=node2 state=resume
	! "$PHX" status --socket "$SOCK" | grep -q '^  node3 '

	# Before: tokens never expired. Now one of a job that ended is refused.
	run srun --jobid="$job" --overlap -N1 -w node1 /usr/bin/python3 \
		"$BATS_TEST_DIRNAME/../security/token_holder.py" "$CKPTD_ADDR" "$old" "$(id -u)" \
		"$old_token" agent node1
	show_run
	[[ "$output" == "refused "*"job $old is not running in Slurm"* ]]

	# Nothing of the lab was touched: no node drained or down but the one drained here.
	for n in node1 node3 node4; do
		[[ "$(node_state "$n")" != drain* && "$(node_state "$n")" != down* ]]
	done
	run curl -sf "http://$CKPTD_METRICS/metrics"
	grep -q '^phalanx_ckptd_authz_refused_total [1-9]' <<<"$output"
	scancel "$job"
	wait_for 30 job_finished "$job"
}

@test "the metrics endpoint exports the ledger and the recovery counters" {
	run curl -sf "http://$CKPTD_METRICS/metrics"
	show_run
	[ "$status" -eq 0 ]
	grep -q '^phalanx_ckptd_goodput_seconds{job="[0-9]*",part="detection"} ' <<<"$output"
	grep -q '^phalanx_ckptd_goodput_ratio{job=' <<<"$output"
	grep -q '^phalanx_ckptd_agents_lost_total [1-9]' <<<"$output"
	grep -q '^phalanx_ckptd_requeues_total [1-9]' <<<"$output"
	grep -q '^phalanx_ckptd_stops_total [1-9]' <<<"$output"
	grep -q '^phalanx_ckptd_job_nodes_lost_total{job="[0-9]*"} [1-9]' <<<"$output"
	"${PHX_PROMTOOL:?tests/quickstart fetches promtool}" check metrics <<<"$output"
}

@test "attack: one user's running jobs share ckptd.max_ranks_per_user; the job over it is refused, the other goes on" {
	local x y hold

	x=$(sbatch --parsable -N2 -w node1,node2 -o /dev/null --wrap 'sleep 300')
	y=$(sbatch --parsable -N2 -w node3,node4 -o /dev/null --wrap 'sleep 300')
	wait_for 60 job_running "$x"
	wait_for 60 job_running "$y"
	# Job X's agent holds 2,048 ranks (its two nodes allow 2 x 1,024).
	PHX_HOLD_S=20 holder "$x" node1 agent:2:2048 node1 >"$CKPTD_DIR/hold.out" &
	hold=$!
	wait_for 30 agents_are "$x" 1
	# Before: job Y's 2,048 more were taken too, and a user with many jobs
	# could fill the daemon's memory for everyone.
	run holder "$y" node3 agent:2:2048 node3
	show_run
	# Job X's 2,048, and any of the file's earlier jobs still winding down.
	[[ "$output" =~ ^closed\ .*"uid $(id -u)'s "[0-9]+" other running job(s) hold "([0-9]+)" ranks here; 2048 more would pass ckptd.max_ranks_per_user (3000)" ]]
	[ "${BASH_REMATCH[1]}" -ge 2048 ]
	# Within the bound job Y registers, and job X's agent was never disturbed.
	run holder "$y" node3 agent:2:900 node3
	show_run
	[ "$output" = open ]
	wait "$hold"
	[ "$(cat "$CKPTD_DIR/hold.out")" = open ]
	scancel "$x" "$y"
	wait_for 30 job_finished "$x"
	wait_for 30 job_finished "$y"
}
