#!/usr/bin/env bash
# The tests of every Go module in the repository (the README's test command,
# which .ci/run calls): vet, then the tests under -race, each module against
# its own go.mod (GOWORK=off), which is what a program importing it gets.
# Servers the tests need: see .ci/run (NACOS_TEST_ADDR, ZOOKEEPER_TEST_ADDR);
# without CI set, a test whose server is absent skips.
set -euo pipefail
cd "$(dirname "$0")"
export GOWORK=off
# The core first, then the opt-in integrations, the CLI and the end-to-end
# tests, which import them.
MODULES=". plugins/serialization/hessian2/oracle registry-nacos registry-zookeeper apps/weft test tracing-otlp"
for m in $MODULES; do
	echo "== $m"
	(cd "$m" && go vet ./... && go test -race -count=1 ./...)
done
# nacos-sdk-go v2.3.2 races inside itself: the tests that drive it in this
# process skip under -race and run here without it.
echo "== nacos, without -race"
(cd test && go test -count=1 -run 'Nacos|ConfigCenter' .)
(cd registry-nacos && go test -count=1 -run 'ServerRestart' .)
# Interop with dubbo-go, grpc-go and Java peers: its own module, without
# -race (dubbo-go and nacos-sdk-go race inside themselves).
echo "== test/interop"
(cd test/interop && go vet ./... && go test -count=1 ./...)
