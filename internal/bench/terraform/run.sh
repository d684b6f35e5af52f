#!/usr/bin/env bash
# converge vs Terraform (bpg/proxmox) on the same simulator: a cores and
# description change on N QEMU VMs, half of them running, both tools
# restarting the running ones so the change takes effect. See README.md.
#
#   internal/bench/terraform/run.sh [N...]      (default: 20 100)
#
# Environment: TOOLS ("terraform converge") which sides to run; RUNS (1) runs
# per N; NODES (3) the simulator's nodes (1: every VM on one node); LATENCY
# (20ms) per API call; POWER_TASK (1s) per power task (qmstart, qmstop,
# qmshutdown, qmreboot, qmreset, qmsuspend, qmresume and their vz*
# counterparts); CONFIG_TASK (0.2s) per asynchronous config task (qmconfig,
# and the work of a synchronous PUT …/config); TASK_LATENCY (1s) every other
# task type, and the fallback of POWER_TASK and CONFIG_TASK when they are not
# set (so TASK_LATENCY=0s alone switches all task latency off);
# PARALLELISM (10) Terraform's -parallelism; VARIANTS the converge
# configurations, "label=flags for converge up" separated by ";" (default
# "defaults=": converge as shipped); UNTHROTTLED=1 adds the labelled variant
# "unthrottled=$UNTHROTTLED_FLAGS" (default "--node-concurrency -1
# --node-rate 1000": no per-node limits); OUT (/tmp/tf-bench) work
# directory; CONVERGE (/tmp/tf-converge) and PROVIDER_DIR (/tmp/tf-plugins)
# where the binaries are (built if missing; BPG_TAG, v0.80.0, the provider's
# tag); BPG_REPO the provider's git repository; SIM_PORT (18006), NATS_PORT
# (14222), HTTP_PORT (18080) the loopback ports.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
RUNS=${RUNS:-1}
LATENCY=${LATENCY:-20ms}
NODES=${NODES:-3}
POWER_TASK=${POWER_TASK:-${TASK_LATENCY:-1s}}
CONFIG_TASK=${CONFIG_TASK:-${TASK_LATENCY:-0.2s}}
TASK_LATENCY=${TASK_LATENCY:-1s}
PARALLELISM=${PARALLELISM:-10}
VARIANTS=${VARIANTS:-defaults=}
UNTHROTTLED_FLAGS=${UNTHROTTLED_FLAGS:---node-concurrency -1 --node-rate 1000}
[ "${UNTHROTTLED:-0}" = 0 ] || VARIANTS="$VARIANTS;unthrottled=$UNTHROTTLED_FLAGS"
OUT=${OUT:-/tmp/tf-bench}
CONVERGE=${CONVERGE:-/tmp/tf-converge}
PROVIDER_DIR=${PROVIDER_DIR:-/tmp/tf-plugins}
BPG_TAG=${BPG_TAG:-v0.80.0}
BPG_REPO=${BPG_REPO:-/work/.mirror/bpg+terraform-provider-proxmox/repo}
SIM_PORT=${SIM_PORT:-18006}
NATS_PORT=${NATS_PORT:-14222}
HTTP_PORT=${HTTP_PORT:-18080}
TOKEN_ID='root@pam!tf'
TOKEN_SECRET=s3cret
NEW_CORES=4
NEW_DESC="changed by the converge-vs-terraform bench"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(20 100)

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

mkdir -p "$OUT"
# Binaries: converge from this checkout, the provider from its source.
if [ ! -x "$CONVERGE" ]; then
	log "building converge → $CONVERGE"
	(cd "$repo" && go build -o "$CONVERGE" ./cmd/converge)
fi
if [ ! -x "$PROVIDER_DIR/terraform-provider-proxmox" ]; then
	log "building bpg/proxmox $BPG_TAG → $PROVIDER_DIR"
	src="$OUT/bpg-src"
	[ -d "$src" ] || git clone -q "$BPG_REPO" "$src"
	git -C "$src" checkout -q "$BPG_TAG"
	mkdir -p "$PROVIDER_DIR"
	(cd "$src" && go build -o "$PROVIDER_DIR/terraform-provider-proxmox" .)
fi
cat >"$OUT/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "bpg/proxmox" = "$PROVIDER_DIR"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE="$OUT/terraformrc" TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
printf '%s' "$TOKEN_SECRET" >"$OUT/token-secret"
chmod 600 "$OUT/token-secret"

sim_pid=""
up_pid=""
cleanup() {
	[ -z "$up_pid" ] || { kill "$up_pid" 2>/dev/null || true; wait "$up_pid" 2>/dev/null || true; }
	[ -z "$sim_pid" ] || { kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; }
	up_pid="" sim_pid=""
}
trap cleanup EXIT

ctl="https://127.0.0.1:$SIM_PORT/_sim"
api="https://127.0.0.1:$SIM_PORT/api2/json"
c() { curl -sfk "$@"; }

# The task types of each latency class (internal/pvesim/tasklatency.go).
POWER_TYPES="qmstart qmstop qmshutdown qmreboot qmreset qmsuspend qmresume vzstart vzstop vzshutdown vzreboot vzsuspend vzresume"
CONFIG_TYPES="qmconfig"

# task_flags POWER CONFIG OTHER: the simulator's task latency flags.
task_flags() {
	local t
	printf -- '--task-latency\n%s\n' "$3"
	for t in $POWER_TYPES; do printf -- '--task-latency-type\n%s=%s\n' "$t" "$1"; done
	for t in $CONFIG_TYPES; do printf -- '--task-latency-type\n%s=%s\n' "$t" "$2"; done
}

# faults_json LATENCY POWER CONFIG OTHER: the same as a PATCH /_sim/faults.
faults_json() {
	jq -nc --arg l "$1" --arg p "$2" --arg c "$3" --arg o "$4" \
		--arg pt "$POWER_TYPES" --arg ct "$CONFIG_TYPES" '
		{latency: $l, task_latency: $o, task_latency_by_type:
			(([$pt | splits(" ")] | map({(.): $p}) | add) + ([$ct | splits(" ")] | map({(.): $c}) | add))}'
}

# start_sim GUESTS DIR LATENCY POWER CONFIG OTHER: a fresh simulator, NODES
# nodes, GUESTS demo guests (every third an LXC container, every second
# running; 3/2·N of them hold N QEMU VMs, half running).
start_sim() {
	local tf
	mapfile -t tf < <(task_flags "$4" "$5" "$6")
	"$CONVERGE" sim --tls --listen "127.0.0.1:$SIM_PORT" --nodes "$NODES" --guests "$1" \
		--token "$TOKEN_ID=$TOKEN_SECRET" --latency "$3" "${tf[@]}" \
		--mutation-log "$2/mutations.jsonl" -o json >"$2/sim.json" 2>"$2/sim.log" &
	sim_pid=$!
	for _ in $(seq 100); do
		[ -s "$2/sim.json" ] && c "$ctl/stats" >/dev/null && return 0
		sleep 0.1
	done
	die "simulator did not start (see $2/sim.log)"
}

# spread_vms N: move the N QEMU VMs so that they lie evenly over the NODES
# nodes (the i-th VM by vmid on node i mod NODES). The demo seed places
# guest i on node i mod NODES and makes every third one a container, so
# at 3 nodes every container would be on pve3 and every VM on pve1 and
# pve2; an estate's VMs use all its nodes. Migrations run at the
# simulator's latency, before anything is timed.
spread_vms() {
	[ "$NODES" -gt 1 ] || return 0
	local moves vmid from to running upid pending
	moves=$(c "$ctl/guests" | jq -r --argjson n "$1" --argjson nodes "$NODES" '
		[.[] | select(.kind == "qemu" and (.config.template // "0") != "1")] | sort_by(.vmid) | .[:$n]
		| to_entries[] | {vmid: .value.vmid, from: .value.node, to: "pve\((.key % $nodes) + 1)", running: (.value.status == "running")}
		| select(.from != .to) | "\(.vmid) \(.from) \(.to) \(.running)"')
	pending=()
	while read -r vmid from to running; do
		[ -n "$vmid" ] || continue
		local args=(-d "target=$to")
		[ "$running" = true ] && args+=(-d online=1 -d with-local-disks=1)
		upid=$(c -H "Authorization: PVEAPIToken=$TOKEN_ID=$TOKEN_SECRET" -X POST "${args[@]}" \
			"$api/nodes/$from/qemu/$vmid/migrate" | jq -r .data) || die "migrating VM $vmid to $to failed"
		pending+=("$from $upid")
	done <<<"$moves"
	local p node
	for p in "${pending[@]}"; do
		read -r node upid <<<"$p"
		for _ in $(seq 600); do
			[ "$(c -H "Authorization: PVEAPIToken=$TOKEN_ID=$TOKEN_SECRET" "$api/nodes/$node/tasks/$upid/status" | jq -r .data.status)" = stopped ] && break
			sleep 0.1
		done
	done
	c "$ctl/guests" | jq -e --argjson n "$1" --argjson nodes "$NODES" '
		[.[] | select(.kind == "qemu" and (.config.template // "0") != "1")] | sort_by(.vmid) | .[:$n]
		| to_entries | all(.value.node == "pve\((.key % $nodes) + 1)")' >/dev/null || die "VMs not spread over the nodes"
}

stats() { c "$ctl/stats"; }
now_ns() { date +%s%N; }

# vms_json: the N QEMU VMs (not templates) as the Terraform variable "vms".
vms_json() {
	c "$ctl/guests" | jq --argjson n "$1" '
		[.[] | select(.kind == "qemu" and (.config.template // "0") != "1")] | sort_by(.vmid) | .[:$n]
		| map({key: (.vmid | tostring), value: {
			node, name: .config.name, cores: (.config.cores | tonumber),
			memory: (.config.memory | tonumber), started: (.status == "running"),
			description: (.config.description // ""),
			mac: (.config.net0 | capture("=(?<m>[0-9A-F:]{17})").m)}})
		| from_entries'
}

# check_done N LABEL: every VM has the new cores and description applied
# (nothing pending), and kept its power state.
check_done() {
	c "$ctl/guests" | jq -e --argjson n "$1" --arg d "$NEW_DESC" --argjson cores "$NEW_CORES" \
		--slurpfile before "$2" '
		[.[] | select(.kind == "qemu" and (.config.template // "0") != "1")] | sort_by(.vmid) | .[:$n]
		| map(select(.config.cores != ($cores|tostring) or .config.description != $d
			or ((.pending // {}) | length) > 0
			or ((.status == "running") != $before[0][.vmid|tostring].started)))
		| if length == 0 then true else (map(.vmid) | "not done: \(.)" | halt_error(1)) end' >/dev/null
}

# breakdown FILE FROM_NS TO_NS: the mutating calls in the window by kind.
breakdown() {
	jq -sc --argjson a "$2" --argjson b "$3" '
		map(select(.at_unix_ns >= $a and .at_unix_ns <= $b)
			| "\(.method) \(.path | sub("^/api2/json/nodes/[^/]+/(qemu|lxc)/[0-9]+"; "…") | sub("^/api2/json"; ""))")
		| group_by(.) | map({(.[0]): length}) | add // {}' "$1"
}

results="$OUT/results.tsv"
[ -s "$results" ] || printf 'n\ttool\trun\tseconds\tcalls\tmutations\ttasks\tcalls_per_vm\ttasks_per_vm\tmutations_by_kind\n' >"$results"

record() { # N TOOL RUN SECONDS STATS0 STATS1 BREAKDOWN
	local calls muts tasks
	calls=$(($(jq .calls <<<"$6") - $(jq .calls <<<"$5")))
	muts=$(($(jq .mutations <<<"$6") - $(jq .mutations <<<"$5")))
	tasks=$(($(jq .tasks <<<"$6") - $(jq .tasks <<<"$5")))
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$calls" "$muts" "$tasks" \
		"$(awk -v a="$calls" -v n="$1" 'BEGIN{printf "%.1f", a/n}')" \
		"$(awk -v a="$tasks" -v n="$1" 'BEGIN{printf "%.2f", a/n}')" "$7" >>"$results"
	log "$2 N=$1 run $3: ${4}s, $calls calls, $muts mutating, $tasks tasks; $7"
}

terraform_run() { # N RUN
	local n=$1 run=$2 dir="$OUT/tf-$1-$2"
	rm -rf "$dir" && mkdir -p "$dir"
	cp "$here/main.tf" "$dir/"
	# Setup, not measured: import the VMs without latency, then check that
	# Terraform sees nothing left to do.
	start_sim $((n * 3 / 2)) "$dir" 0s 0s 0s 0s
	spread_vms "$n"
	vms_json "$n" >"$dir/before.json"
	[ "$(jq length "$dir/before.json")" = "$n" ] || die "expected $n QEMU VMs"
	jq -n --arg e "https://127.0.0.1:$SIM_PORT/" --arg t "$TOKEN_ID=$TOKEN_SECRET" --slurpfile v "$dir/before.json" \
		'{endpoint: $e, api_token: $t, vms: $v[0]}' >"$dir/terraform.tfvars.json"
	(cd "$dir" && terraform apply -auto-approve -no-color -input=false -parallelism="$PARALLELISM" >setup.log 2>&1) ||
		die "terraform import/setup failed (see $dir/setup.log)"
	(cd "$dir" && terraform plan -no-color -input=false -detailed-exitcode >setup-plan.log 2>&1) ||
		die "after setup Terraform still plans changes (see $dir/setup-plan.log)"
	# The change.
	jq --arg d "$NEW_DESC" --argjson cores "$NEW_CORES" \
		'.vms |= map_values(.cores = $cores | .description = $d)' \
		"$dir/terraform.tfvars.json" >"$dir/change.json" && mv "$dir/change.json" "$dir/terraform.tfvars.json"
	c -X PATCH "$ctl/faults" -d "$(faults_json "$LATENCY" "$POWER_TASK" "$CONFIG_TASK" "$TASK_LATENCY")" >/dev/null
	local s0 s1 t0 t1
	s0=$(stats)
	t0=$(now_ns)
	(cd "$dir" && terraform apply -auto-approve -no-color -input=false -parallelism="$PARALLELISM" >apply.log 2>&1) ||
		die "terraform apply failed (see $dir/apply.log)"
	t1=$(now_ns)
	s1=$(stats)
	printf '%s\n%s\n' "$s0" "$s1" >"$dir/stats.jsonl"
	check_done "$n" "$dir/before.json" || die "terraform: change not in effect"
	record "$n" terraform "$run" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", (b-a)/1e9}')" "$s0" "$s1" \
		"$(breakdown "$dir/mutations.jsonl" "$t0" "$t1")"
	cleanup
}

converge_run() { # N RUN LABEL FLAGS
	local n=$1 run=$2 label=$3 flags=$4 dir="$OUT/cv-$3-$1-$2"
	rm -rf "$dir" && mkdir -p "$dir"
	start_sim $((n * 3 / 2)) "$dir" "$LATENCY" "$POWER_TASK" "$CONFIG_TASK" "$TASK_LATENCY"
	spread_vms "$n"
	vms_json "$n" >"$dir/before.json"
	local fp
	fp=$(jq -r .fingerprint "$dir/sim.json")
	# --restart allowed: restart running VMs for the pending cores, as
	# Terraform's reboot_after_update does; --guard-share 1: the mass-change
	# guard would otherwise hold all but 10 % (min 5) of the restarts for
	# an operator's approval.
	# shellcheck disable=SC2086
	"$CONVERGE" up --data "$dir/data" --pve-url "https://127.0.0.1:$SIM_PORT" \
		--pve-token-id "$TOKEN_ID" --pve-token-secret-file "$OUT/token-secret" --pve-fingerprint "$fp" \
		--nats-listen "127.0.0.1:$NATS_PORT" --http "127.0.0.1:$HTTP_PORT" --log-format json \
		--restart allowed --guard-share 1 $flags >"$dir/up.log" 2>&1 &
	up_pid=$!
	local cli=("$CONVERGE" --data "$dir/data" --nats "nats://127.0.0.1:$NATS_PORT")
	for _ in $(seq 300); do
		[ -s "$dir/data/nats-users.json" ] && "${cli[@]}" status >/dev/null 2>&1 && break
		kill -0 "$up_pid" 2>/dev/null || die "converge up exited (see $dir/up.log)"
		sleep 0.2
	done
	# Setup, not measured: adopt the VMs with their current state as desired
	# (converge's "import"), and wait until converged.
	jq '[to_entries[] | {vmid: (.key|tonumber), kind: "qemu", cores: .value.cores,
		description: .value.description, power: (if .value.started then "running" else "stopped" end)}]' \
		"$dir/before.json" >"$dir/adopt.json"
	"${cli[@]}" desire -f "$dir/adopt.json" >"$dir/adopt.log" 2>&1 || die "desire (adopt) failed"
	"${cli[@]}" wait -f "$dir/adopt.json" --timeout 5m >>"$dir/adopt.log" 2>&1 || die "adopt did not converge (see $dir/adopt.log)"
	# The change: published and waited for by the CLI, as a platform would.
	jq --arg d "$NEW_DESC" --argjson cores "$NEW_CORES" 'map(.cores = $cores | .description = $d)' \
		"$dir/adopt.json" >"$dir/change.json"
	local s0 s1 t0 t1
	s0=$(stats)
	t0=$(now_ns)
	"${cli[@]}" desire -f "$dir/change.json" >"$dir/change.log" 2>&1 || die "desire (change) failed"
	"${cli[@]}" wait -f "$dir/change.json" --timeout 10m >>"$dir/change.log" 2>&1 ||
		die "change did not converge (see $dir/change.log)"
	t1=$(now_ns)
	s1=$(stats)
	printf '%s\n%s\n' "$s0" "$s1" >"$dir/stats.jsonl"
	check_done "$n" "$dir/before.json" || die "converge: change not in effect"
	record "$n" "converge/$label" "$run" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", (b-a)/1e9}')" "$s0" "$s1" \
		"$(breakdown "$dir/mutations.jsonl" "$t0" "$t1")"
	# Idle background of the observer (inventory and verification reads) for
	# comparison: calls over 10 s with nothing to do.
	local i0 i1
	i0=$(stats)
	sleep 10
	i1=$(stats)
	log "converge N=$n idle: $(($(jq .calls <<<"$i1") - $(jq .calls <<<"$i0"))) calls in 10 s"
	printf '%s\n' "$(($(jq .calls <<<"$i1") - $(jq .calls <<<"$i0")))" >"$dir/idle-calls-10s"
	"${cli[@]}" history "$(jq -r 'keys[0]' "$dir/before.json")" >"$dir/history-first.txt" 2>&1 || true
	"${cli[@]}" history "$(jq -r '[to_entries[] | select(.value.started)][0].key' "$dir/before.json")" \
		>"$dir/history-running.txt" 2>&1 || true
	# The history of every guest that got more than one config write.
	local id
	for id in $(jq -r --argjson a "$t0" --argjson b "$t1" 'select(.at_unix_ns >= $a and .at_unix_ns <= $b
			and .method == "POST" and (.path | endswith("/config"))) | .vmid' "$dir/mutations.jsonl" |
		sort | uniq -d); do
		"${cli[@]}" history "$id" >"$dir/history-$id.txt" 2>&1 || true
	done
	cleanup
}

TOOLS=${TOOLS:-terraform converge}
for n in "${sizes[@]}"; do
	[ $((n % 4)) = 0 ] || die "N must be a multiple of 4 (half the VMs running)"
	for run in $(seq "$RUNS"); do
		for tool in $TOOLS; do
			case $tool in
			terraform) terraform_run "$n" "$run" ;;
			converge)
				IFS=';' read -ra vs <<<"$VARIANTS"
				for v in "${vs[@]}"; do
					converge_run "$n" "$run" "${v%%=*}" "${v#*=}"
				done
				;;
			*) die "unknown tool $tool" ;;
			esac
		done
	done
done

# The table: medians over the runs, each converge variant against Terraform.
awk -F'\t' 'NR > 1 { k = $1 SUBSEP $2; t[k] = t[k] " " $4; cpv[k] = $8; tpv[k] = $9; r[k]++; tools[$2] = 1; ns[$1] = 1 }
END {
	printf "%5s  %-22s %5s %10s %9s %10s %10s\n", "N", "tool", "runs", "median_s", "speedup", "calls/VM", "tasks/VM"
	for (n in ns) for (tool in tools) {
		k = n SUBSEP tool
		if (!(k in r)) continue
		tf = (n SUBSEP "terraform") in r ? med(t[n SUBSEP "terraform"]) : 0
		m = med(t[k])
		printf "%5s  %-22s %5d %10.2f %9s %10s %10s\n", n, tool, r[k], m,
			(tool == "terraform" || tf == 0 ? "-" : sprintf("%.2fx", tf / m)), cpv[k], tpv[k]
	}
}
function med(s,   v, k, i, j, x) {
	k = split(s, v, " ")
	for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > x + 0; j--) v[j + 1] = v[j]; v[j + 1] = x }
	return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
}' "$results" | (IFS= read -r h; echo "$h"; sort -k1,1n -k2,2) |
	{ echo "# NODES=$NODES LATENCY=$LATENCY POWER_TASK=$POWER_TASK CONFIG_TASK=$CONFIG_TASK TASK_LATENCY=$TASK_LATENCY PARALLELISM=$PARALLELISM"; cat; } | tee "$OUT/table.txt"
log "per-run figures: $results; logs under $OUT"
