#!/usr/bin/env bash
# ceiling.sh tells which side of a weft dubbo exchange limits it at a given
# concurrency: weft's consumer and provider, each against the ideal other
# side (test/bench/replay: the same bytes, recorded from a real call, with
# no serialization, a goroutine per request and a writer that flushes when
# its queue is empty), and the ideal pair, interleaved, medians.
#
#   test/bench/ceiling.sh              c=16, 3 repetitions of 5 s, 1 KiB
#   C=16 SIZE=16384 test/bench/ceiling.sh 3 5s
#
# A pair's qps divided by the ideal pair's is how much of the one-connection
# ceiling that pair reaches; weft/ideal against ideal/weft says whether the
# consumer or the provider holds it back.
set -euo pipefail
cd "$(dirname "$0")/../.."
C=${C:-16}
SIZE=${SIZE:-1024}
REPS=${1:-3}
DUR=${2:-5s}
PORT=${PORT:-21930}
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
(cd apps/weft && GOWORK=off go build -o "$W/weft" .)
go build -o "$W/weft-echo" ./apps/examples/echo
(cd test && go build -o "$W/replay" ./bench/replay)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
up() { for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "ceiling.sh: nothing listens on $1" >&2; return 1; }
URL="dubbo://127.0.0.1:$PORT/org.weft.bench.EchoService"

# Record one real call and its answer through the relay.
"$W/weft-echo" -addr 127.0.0.1:$PORT >/dev/null 2>&1 & sp=$!
up $PORT
"$W/replay" -mode capture -listen 127.0.0.1:$((PORT + 1)) -target 127.0.0.1:$PORT -dir "$W" & rp=$!
up $((PORT + 1))
"$W/weft" bench -c 1 -size "$SIZE" -d 300ms -warmup 0s "dubbo://127.0.0.1:$((PORT + 1))/org.weft.bench.EchoService" >/dev/null
wait $rp
kill $sp; wait $sp 2>/dev/null || true

LOG=$W/log.txt
for r in $(seq "$REPS"); do for pair in weft/weft replay/weft weft/replay replay/replay; do
	cl=${pair%/*} sv=${pair#*/}
	if [ "$sv" = weft ]; then "$W/weft-echo" -addr 127.0.0.1:$PORT >/dev/null 2>&1 & sp=$!
	else "$W/replay" -mode server -listen 127.0.0.1:$PORT -dir "$W" & sp=$!; fi
	up $PORT
	s0=$(cpu $sp)
	if [ "$cl" = weft ]; then
		out=$("$W/weft" bench -json -c "$C" -size "$SIZE" -d "$DUR" -warmup 1s "$URL" |
			python3 -c 'import json,sys;j=json.loads(sys.stdin.read());print("qps=%.0f p50=%.0fus p99=%.0fus"%(j["qps"],j["p50_ms"]*1e3,j["p99_ms"]*1e3))')
	else
		out=$("$W/replay" -mode client -target 127.0.0.1:$PORT -dir "$W" -c "$C" -d "$DUR")
	fi
	s1=$(cpu $sp)
	kill $sp; wait $sp 2>/dev/null || true
	echo "rep=$r consumer=$cl provider=$sv c=$C size=$SIZE $out provider_ticks=$((s1 - s0))" | tee -a "$LOG"
done; done
python3 - "$LOG" <<'PY'
import re, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r'(\w+)=([\w.]+)', line))
    rows.setdefault((kv['consumer'], kv['provider']), []).append(kv)
med = lambda rs, k: statistics.median(float(re.sub('us$', '', r[k])) for r in rs)
ideal = med(rows[('replay', 'replay')], 'qps')
print('| consumer | provider | runs | qps | p50 us | p99 us | of the ideal pair |')
print('|---|---|---|---|---|---|---|')
for (cl, sv), rs in rows.items():
    name = lambda s: 'ideal (replay)' if s == 'replay' else 'weft'
    print('| %s | %s | %d | %.0f | %.0f | %.0f | %.0f%% |' % (name(cl), name(sv), len(rs), med(rs, 'qps'), med(rs, 'p50'), med(rs, 'p99'), 100 * med(rs, 'qps') / ideal))
PY
