#!/usr/bin/env bash
# Runs go-proxmox's own integration tests (tests/integration of the
# go-proxmox version go.mod requires, v0.8.1) against `converge sim`.
# `make goproxmox-it` runs it; e2e/goproxmox/README.md explains it and
# SKIPPED.md lists the tests it leaves out, with why. The `| \`TestX\` |`
# rows of SKIPPED.md's table ARE the skip list: this script reads them.
#
# Needs: the Go toolchain and the Go module proxy (for go-proxmox's own
# test dependencies, e.g. testify v1.10.0, which converge's go.sum does not
# hold). No other network access: the simulator listens on 127.0.0.1.
#
# Environment: GO (default go); GOPROXMOX_IT_ALL=1 also runs the skipped
# tests (reported, not counted as failures); GOPROXMOX_IT_LOGS (default
# bin/goproxmox-it) where each test's verbose output is written;
# GOPROXMOX_IT_KEEP=1 keeps the work directory.
set -euo pipefail

GO=${GO:-go}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/e2e/goproxmox
logs=${GOPROXMOX_IT_LOGS:-$root/bin/goproxmox-it}
cd "$root"

mod=github.com/luthermonson/go-proxmox
version=$($GO list -m -f '{{.Version}}' "$mod")
moddir=$($GO mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$moddir/tests/integration" ] || { echo "no tests/integration in $moddir" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/goproxmox-it.XXXXXX")
sim_pid=
cleanup() {
	if [ -n "$sim_pid" ]; then
		kill "$sim_pid" 2>/dev/null || true
		wait "$sim_pid" 2>/dev/null || true
	fi
	if [ "${GOPROXMOX_IT_KEEP:-}" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# A writable copy of the module as the module proxy served it: its own
# go.mod and go.sum pin the tests' dependencies, as upstream runs them
# (mage test:integration = go test ./tests/integration -tags "nodes containers vms").
cp -r "$moddir/." "$work/gpx"
chmod -R u+w "$work/gpx"
it=$work/gpx/tests/integration
# v0.8.1's "nodes" files use helpers upstream deleted; restore them (provenance
# in the file).
cp "$here/testdata/helpers_test.go" "$it/zz_converge_helpers_test.go"
# v0.8.1's VirtualMachine.Delete takes options; its own test still calls the
# old one-argument form. The one compile fix applied to upstream's tests:
sed -i 's/vm\.Delete(context\.TODO())/vm.Delete(context.TODO(), nil)/' "$it/virtual_machines_test.go"
grep -q 'vm.Delete(context.TODO(), nil)' "$it/virtual_machines_test.go" || { echo "compile fix no longer applies" >&2; exit 1; }

echo "== building go-proxmox $version integration tests and converge"
(cd "$work/gpx" && GOWORK=off GOFLAGS=-buildvcs=false $GO test -c -tags 'nodes containers vms' -o "$work/it.test" ./tests/integration)
$GO build -o "$work/converge" ./cmd/converge

# Test names before the environment is set (init() then does nothing).
tests=$("$work/it.test" -test.list '.' | grep '^Test' || true)
skips=$(grep -o '^| `Test[A-Za-z0-9_]*`' "$here/SKIPPED.md" | tr -d '|` ' || true)
for s in $skips; do
	grep -qx "$s" <<<"$tests" || { echo "SKIPPED.md lists $s, which go-proxmox $version does not have" >&2; exit 1; }
done

password=it-$$-$RANDOM
token_id='root@pam!goproxmoxit'
secret=it-secret-$$-$RANDOM
"$work/converge" sim --listen 127.0.0.1:0 -o json --nodes 1 --guests 3 \
	--password "$password" --token "$token_id=$secret" \
	>"$work/sim.json" 2>"$work/sim.log" &
sim_pid=$!
url=
for _ in $(seq 1 100); do
	url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$work/sim.json")
	[ -n "$url" ] && break
	kill -0 "$sim_pid" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "simulator did not print its URL" >&2; exit 1; }
echo "== simulator pid $sim_pid at $url"

export PROXMOX_URL=$url
export PROXMOX_USERNAME=root@pam PROXMOX_PASSWORD=$password
export PROXMOX_TOKENID=$token_id PROXMOX_SECRET=$secret
export PROXMOX_NODE_NAME=pve1 PROXMOX_NODE_STORAGE=local
# TestTask_JsonUnmarshal* expect a Unix time read as midnight local time in
# UTC-7 (the author's zone): an assumption about the machine, not the server.
export TZ=America/Denver

mkdir -p "$logs"
pass=0 fail=0 skip=0 failed=
cd "$it" # TestStorage_Upload writes its ISO to ./
for t in $tests; do
	skipped=
	grep -qx "$t" <<<"$skips" && skipped=1
	if [ -n "$skipped" ] && [ "${GOPROXMOX_IT_ALL:-}" != 1 ]; then
		printf '%-36s SKIP (SKIPPED.md)\n' "$t"; skip=$((skip+1)); continue
	fi
	# One process per test: several tests dereference a nil task when a call
	# fails, and a panic would end the others.
	if timeout 180 "$work/it.test" -test.run "^$t\$" -test.count=1 -test.timeout 150s -test.v >"$logs/$t.log" 2>&1; then
		r=PASS
	else
		r=FAIL
	fi
	if [ -n "$skipped" ]; then
		printf '%-36s %s (skipped test, not counted)\n' "$t" "$r"; skip=$((skip+1)); continue
	fi
	printf '%-36s %s\n' "$t" "$r"
	if [ $r = PASS ]; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $t"; fi
done
echo "== go-proxmox $version integration tests against converge sim: $pass passed, $fail failed, $skip skipped (logs: $logs)"
if [ "$fail" -gt 0 ]; then
	for t in $failed; do echo "--- $t"; grep -v '^\[DEBUG\]' "$logs/$t.log" | tail -20; done
	exit 1
fi
