#!/usr/bin/env bash
# triple-peers.sh runs weft's Triple beside grpc-go on a 1 KiB unary echo,
# interleaved, each with its own load generator: grpc-go's (one
# connection, ../shared/peers/grpcgo) against its server, `weft bench
# tri://` against the echo example's protobuf service. It prints one line
# per run (qps, p99, provider and client CPU); compare medians.
#
#   test/bench/triple-peers.sh            3 repetitions of 10 s, c = 1 16 100
#   test/bench/triple-peers.sh 5 10s
#
# It needs the peers built (bash ../shared/peers/bench.sh build; BIN as
# there) and builds weft's two binaries itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS_BIN=${BIN:-$HOME/.cache/weft-peers}
[ -x "$PEERS_BIN/grpcgo-server" ] || { echo "triple-peers.sh: no $PEERS_BIN/grpcgo-server; run bash ../shared/peers/bench.sh build first" >&2; exit 2; }
WB=$(mktemp -d); trap 'rm -rf "$WB"' EXIT
(cd apps/weft && GOWORK=off go build -o "$WB/weft" .)
go build -o "$WB/weft-echo" ./apps/examples/echo
PORT=${PORT:-20941}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for r in $(seq 1 "${1:-3}"); do for c in ${CONCS:-1 16 100}; do for s in grpcgo weft; do
	if [ $s = grpcgo ]; then
		"$PEERS_BIN/grpcgo-server" -port "$PORT" -max-life 120s >/dev/null &
	else
		"$WB/weft-echo" -addr 127.0.0.1:$((PORT + 1)) -tri "127.0.0.1:$PORT" 2>/dev/null &
	fi
	sp=$!
	for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
	if [ $s = grpcgo ]; then
		"$PEERS_BIN/grpcgo-load" -port "$PORT" -c "$c" -size 1024 -d "${2:-10s}" -warmup 1s -provider-pid "$sp" -label grpcgo | grep '^grpcgo ' |
			awk -v r="$r" '{print "rep=" r, $1, $2, $5, $8, $12, $11}'
	else
		s0=$(cpu "$sp")
		js=$("$WB/weft" bench -json -c "$c" -d "${2:-10s}" -warmup 1s "tri://127.0.0.1:$PORT/weftbench.echo.EchoService")
		s1=$(cpu "$sp")
		python3 -c "import json,sys;j=json.loads(sys.argv[1]);d=float(j['seconds'])+1;print('rep=%s weft-tri c=%d qps=%.0f p99=%.0fus server_cpu=%.0f%% client_cpu=%.0f%%'%(sys.argv[4],j['concurrency'],j['qps'],j['p99_ms']*1e3,(int(sys.argv[3])-int(sys.argv[2]))/d,j.get('client_cpu_pct',0)))" "$js" "$s0" "$s1" "$r"
	fi
	kill "$sp"; wait "$sp" 2>/dev/null || true
done; done; done
