#!/usr/bin/env bash
# polaris.sh builds, starts and stops a PolarisMesh server for the Nacos
# registry tests (registry-nacos). PolarisMesh is a Go registry with a
# Nacos-compatible front end: Nacos v1 HTTP on 127.0.0.1:8848 and Nacos v2
# gRPC on 127.0.0.1:9848. It needs neither Docker nor Maven: it is built from
# the Go module proxy.
#
#   test/nacos/polaris.sh build DIR   download, patch the config, build DIR/polaris-server
#   test/nacos/polaris.sh start DIR   start it in the background (data and logs in DIR,
#                                     DIR/polaris.log), wait until ready, print the pid
#   test/nacos/polaris.sh stop DIR    stop the server started from DIR
#   test/nacos/polaris.sh dump DIR    print what the running server's goroutines
#                                     wait on (pprof), and its recent errors
#
# The build applies polaris.patch (next to this script): PolarisMesh v1.18.1
# notifies subscribers while holding its push center's lock, and waits
# without limit for a client's stream to take a push, so one client that
# does not read its stream stalled every subscribe and push of the server
# (CI on 2026-12-02: every Nacos test after the first push timed out).
#
# All three are idempotent: build skips when the binary exists, start returns
# the running pid when the server already answers, stop is quiet when nothing
# runs. Then:
#
#   NACOS_TEST_ADDR=127.0.0.1:8848 go test -race ./registry-nacos/
#
# Environment: POLARIS_VERSION (default v1.18.1), POLARIS_START_TIMEOUT
# (seconds, default 60).
set -euo pipefail

VERSION=${POLARIS_VERSION:-v1.18.1}
MODULE=github.com/polarismesh/polaris
READY_URL=http://127.0.0.1:8848/nacos/v1/ns/operator/metrics
START_TIMEOUT=${POLARIS_START_TIMEOUT:-60}

usage() {
	echo "usage: $0 build|start|stop|dump DIR" >&2
	exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
BIN=$DIR/polaris-server
PIDFILE=$DIR/polaris.pid
LOG=$DIR/polaris.log
PATCH=$(cd "$(dirname "$0")" && pwd)/polaris.patch
STAMP=$BIN.patch

log() { echo "polaris.sh: $*" >&2; }

ready() {
	curl -fsS --max-time 2 "$READY_URL" 2>/dev/null | grep -q '"UP"'
}

# patch_config rewrites the release config for a local standalone server:
# boltdb store in DIR, every listener on 127.0.0.1, namespaces and services
# created on first use, no eureka or xds listener.
patch_config() {
	local src=$1 dst=$2
	awk '
		# The release config has CRLF line ends.
		{ sub(/\r$/, "") }
		# Drop the service-eureka and xds-v3 apiserver entries.
		/^  - name: / { skip = ($3 == "service-eureka" || $3 == "xds-v3") }
		/^[^ #]/ { skip = 0 }
		skip { next }
		{
			sub(/listenIP: "0\.0\.0\.0"/, "listenIP: \"127.0.0.1\"")
			sub(/^    # self_address: 127\.0\.0\.1/, "    self_address: 127.0.0.1")
			sub(/path: \.\/polaris\.bolt/, "path: ./data/polaris.bolt")
			print
		}
	' "$src" >"$dst"
	# autoCreate is already true in v1.18.1; make sure of it.
	sed -i 's/^\(  autoCreate:\) .*/\1 true/' "$dst"
	grep -q 'name: boltdbStore' "$dst" || { log "config: boltdb store not found"; exit 1; }
	if grep -q '0\.0\.0\.0' "$dst"; then log "config: a listener is still on 0.0.0.0"; exit 1; fi
	if grep -Eq 'name: (service-eureka|xds-v3)' "$dst"; then log "config: eureka/xds listener left"; exit 1; fi
}

build() {
	local want
	want="$VERSION $(sha256sum "$PATCH" | cut -d' ' -f1)"
	if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
		log "$BIN exists ($want), skipping build"
		return
	fi
	local t0=$SECONDS src
	src=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$src" ] && [ -d "$src" ] || { log "go mod download $MODULE@$VERSION failed"; exit 1; }
	rm -rf "$DIR/src"
	cp -r "$src" "$DIR/src"
	chmod -R u+w "$DIR/src"
	mkdir -p "$DIR/conf"
	cp -r "$DIR/src/release/conf/." "$DIR/conf/"
	patch_config "$DIR/src/release/conf/polaris-server.yaml" "$DIR/conf/polaris-server.yaml"
	(cd "$DIR/src" && patch -p1 --forward --quiet <"$PATCH") || { log "polaris.patch does not apply to $VERSION"; exit 1; }
	log "building $MODULE@$VERSION in $DIR/src"
	(cd "$DIR/src" && CGO_ENABLED=0 go build -o "$BIN.tmp" .)
	mv "$BIN.tmp" "$BIN"
	echo "$want" >"$STAMP"
	log "built $BIN in $((SECONDS - t0)) s"
}

# running_pid, wait_ready and stop.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh"

start() {
	[ -x "$BIN" ] || { log "$BIN missing: run $0 build $DIR first"; exit 1; }
	local pid
	if pid=$(running_pid); then
		if ready; then
			echo "$pid"
			return
		fi
	elif ready; then
		log "something else already answers on $READY_URL"
		exit 1
	fi
	if [ -z "${pid:-}" ]; then
		# POLARIS_FRESH=1: start from an empty store, as a clean machine
		# would, rather than with every service earlier runs left behind.
		if [ "${POLARIS_FRESH:-}" = 1 ]; then
			rm -rf "$DIR/data"
		fi
		mkdir -p "$DIR/data"
		# As root, the server runs ahead of the tests (nice -5): it stands
		# for a Nacos cluster on other machines, and a test on a machine
		# with both cores busy should meet a slow client, not a server
		# starved into dropping its connections.
		local nice=""
		[ "$(id -u)" = 0 ] && nice="nice -n -5"
		# cwd DIR: the config's relative paths (log/, data/, conf/) land in DIR.
		(cd "$DIR" && exec $nice nohup "$BIN" start -c conf/polaris-server.yaml >>"$LOG" 2>&1 </dev/null) &
		pid=$!
		echo "$pid" >"$PIDFILE"
	fi
	wait_ready "$pid"
}


# dump prints, for a failed run, where the server's goroutines wait (the
# pprof listener of the api-http server, 127.0.0.1:8090) and its last errors.
dump() {
	echo "polaris.sh: goroutines of the server (pprof, grouped by stack):"
	curl -fsS --max-time 10 "http://127.0.0.1:8090/debug/pprof/goroutine?debug=1" 2>&1 | head -c 60000 || true
	echo "polaris.sh: last errors of the Nacos front end:"
	tail -n 20 "$DIR/log/runtime/nacos-apiserver-error.log" 2>/dev/null | cut -c1-300 || true
}

case $cmd in
dump) dump ;;
build) build ;;
start) start ;;
stop) stop ;;
*) usage ;;
esac
