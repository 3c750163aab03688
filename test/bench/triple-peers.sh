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
# there) and builds weft's two binaries itself. BEFORE=DIR also runs the
# weft and weft-echo binaries in DIR (another build, say the one before a
# change) as the system weft-tri@before. It ends with the table of medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS_BIN=${BIN:-$HOME/.cache/weft-peers}
[ -x "$PEERS_BIN/grpcgo-server" ] || { echo "triple-peers.sh: no $PEERS_BIN/grpcgo-server; run bash ../shared/peers/bench.sh build first" >&2; exit 2; }
WB=$(mktemp -d); trap 'rm -rf "$WB"' EXIT
(cd apps/weft && GOWORK=off go build -o "$WB/weft" .)
go build -o "$WB/weft-echo" ./apps/examples/echo
PORT=${PORT:-20941}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
SYSTEMS="grpcgo weft"
[ -n "${BEFORE:-}" ] && SYSTEMS="grpcgo before weft"
LOG=$WB/results.txt
for r in $(seq 1 "${1:-3}"); do for c in ${CONCS:-1 16 100}; do for s in $SYSTEMS; do
	bin=$WB label=weft-tri
	[ $s = before ] && bin=$BEFORE label=weft-tri@before
	if [ $s = grpcgo ]; then
		"$PEERS_BIN/grpcgo-server" -port "$PORT" -max-life 120s >/dev/null &
	else
		"$bin/weft-echo" -addr 127.0.0.1:$((PORT + 1)) -tri "127.0.0.1:$PORT" 2>/dev/null &
	fi
	sp=$!
	for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
	if [ $s = grpcgo ]; then
		"$PEERS_BIN/grpcgo-load" -port "$PORT" -c "$c" -size 1024 -d "${2:-10s}" -warmup 1s -provider-pid "$sp" -label grpcgo | grep '^grpcgo ' |
			awk -v r="$r" '{print "rep=" r, $1, $2, $5, $6, $8, $12, $11}' | tee -a "$LOG"
	else
		s0=$(cpu "$sp")
		js=$("$bin/weft" bench -json -c "$c" -d "${2:-10s}" -warmup 1s "tri://127.0.0.1:$PORT/weftbench.echo.EchoService")
		s1=$(cpu "$sp")
		python3 -c "import json,sys;j=json.loads(sys.argv[1]);d=float(j['seconds'])+1;print('rep=%s %s c=%d qps=%.0f p50=%.0fus p99=%.0fus server_cpu=%.0f%% client_cpu=%.0f%%'%(sys.argv[4],sys.argv[5],j['concurrency'],j['qps'],j['p50_ms']*1e3,j['p99_ms']*1e3,(int(sys.argv[3])-int(sys.argv[2]))/d,j.get('client_cpu_pct',0)))" "$js" "$s0" "$s1" "$r" "$label" | tee -a "$LOG"
	fi
	kill "$sp"; wait "$sp" 2>/dev/null || true
done; done; done
# Medians per system and c, and weft's ratio to grpc-go.
python3 - "$LOG" <<'PY'
import re, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 3 or 'qps=' not in line:
        continue
    kv = dict(re.findall(r'(\w+)=([0-9.]+)', line))
    rows.setdefault((f[1], int(kv['c'])), []).append(kv)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs if k in r)
print('| system | c | runs | qps | p50 us | p99 us | server CPU % | qps / grpc-go | p99 / grpc-go |')
print('|---|---|---|---|---|---|---|---|---|')
for (sysname, c), rs in sorted(rows.items(), key=lambda x: (x[0][1], x[0][0] != 'grpcgo', x[0][0])):
    g = rows.get(('grpcgo', c))
    q, p99 = med(rs, 'qps'), med(rs, 'p99')
    rq = '%.2f' % (q / med(g, 'qps')) if g else '-'
    rp = '%.2f' % (p99 / med(g, 'p99')) if g else '-'
    print('| %s | %d | %d | %.0f | %.0f | %.0f | %.0f | %s | %s |' % (sysname, c, len(rs), q, med(rs, 'p50'), p99, med(rs, 'server_cpu'), rq, rp))
PY
