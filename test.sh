#!/usr/bin/env bash
# The tests of every Go module in the repository (the README's test command,
# which .ci/run calls): vet, then the tests under -race, each module against
# its own go.mod (GOWORK=off), which is what a program importing it gets.
# Servers the tests need: see .ci/run (NACOS_TEST_ADDR, ZOOKEEPER_TEST_ADDR);
# without CI set, a test whose server is absent skips.
#
# Every module and every step runs even when an earlier one fails: one red
# module must not hide the state of the others (a CI run that stopped at the
# first failure never ran the modules after it). The failed steps are listed
# at the end, and the script exits non-zero if there was any.
set -uo pipefail
cd "$(dirname "$0")"
export GOWORK=off

FAILED=()
# step NAME DIR CMD...: runs CMD in DIR and records NAME if it fails.
step() {
	local name=$1 dir=$2
	shift 2
	echo "== $name"
	if ! (cd "$dir" && "$@"); then
		echo "-- FAILED: $name"
		FAILED+=("$name")
	fi
}

# The core first, then the opt-in integrations, the CLI and the end-to-end
# tests, which import them.
MODULES=". plugins/serialization/hessian2/oracle registry-nacos registry-zookeeper mesh-xds apps/weft test tracing-otlp"
# -timeout 20m: test/ builds WASM guests of four toolchains and runs
# Apps end to end; on a loaded machine (stress-ng --cpu 2) its binary has
# gone past go test's default 10 minutes.
for m in $MODULES; do
	step "$m: go vet" "$m" go vet ./...
	step "$m: go test -race" "$m" go test -race -count=1 -timeout 20m ./...
done
# The decode budget weighed against the heap: allocation figures under
# -race are the race runtime's, so these run here without it.
step "hessian2: decode budget, without -race" plugins/serialization/hessian2 go test -count=1 -run 'DecodeBudget' .
# nacos-sdk-go v2.3.2 races inside itself: the tests that drive it in this
# process skip under -race and run here without it.
step "test: nacos, without -race" test go test -count=1 -run 'Nacos|ConfigCenter' .
# The same SDK races in its start-up and reconnect paths: registry-nacos'
# tests against the server skip under -race (serverAddr) and run here.
step "registry-nacos: against the server, without -race" registry-nacos go test -count=1 .
# go-zookeeper races inside itself when it reconnects (go-zookeeper/zk#35):
# the test that makes it reconnect skips under -race and runs here.
step "registry-zookeeper: reconnect, without -race" registry-zookeeper go test -count=1 -run 'WatchArmedAgainAfterReconnect' .
# Interop with dubbo-go, grpc-go and Java peers: its own module, without
# -race (dubbo-go and nacos-sdk-go race inside themselves).
step "test/interop: go vet" test/interop go vet ./...
step "test/interop: go test" test/interop go test -count=1 ./...
# h2spec, the HTTP/2 conformance suite, against a Triple provider: its own
# module (it pins h2spec as a tool).
step "test/h2spec: go test -race" test/h2spec go test -race -count=1 ./...
# Every command the README and docs/ show, run as written from the root
# (servers in the background, against the ports they name): a doc that
# drifts from the code fails here. Last: it builds and runs the programs
# the steps above tested.
step "docs: the commands of README.md and docs/" . test/docs/run-commands.sh

echo
if ((${#FAILED[@]})); then
	# Where the Nacos stand-in waits, if it ran: a stalled server shows
	# here rather than only as timeouts in the tests.
	if [ -n "${NACOS_TEST_POLARIS_DIR:-}" ]; then
		test/nacos/polaris.sh dump "$NACOS_TEST_POLARIS_DIR" | head -c 8000
		echo
	fi
	echo "test.sh: ${#FAILED[@]} step(s) failed:"
	printf '  %s\n' "${FAILED[@]}"
	exit 1
fi
echo "test.sh: every step passed"
