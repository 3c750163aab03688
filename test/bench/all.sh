#!/usr/bin/env bash
# all.sh reproduces every figure of docs/performance.md in one run on this
# machine, and prints them as the tables that page shows:
#
#   1. the peers' matrix on a 1 KiB dubbo echo: weft beside Kitex, grpc-go
#      and raw TCP (a goroutine per request), c = 1, 16, 100 (peers.sh);
#   2. the same on a 16 KiB echo, c = 16, 100, and on a 256 KiB echo,
#      c = 16 (grpc-go left out: it is another protocol, and the 1 KiB
#      table places it);
#   3. Triple unary beside grpc-go, each with its own client (triple-peers.sh);
#   4. Triple streaming of 1 KiB messages on one stream beside grpc-go,
#      client and server streaming (BenchmarkStreamOneKiB, test/interop);
#   5. the WASM filters' cost per call (BenchmarkFilter, filters-wasm);
#   6. the one-connection ceiling at c = 16, 1 KiB and 16 KiB: weft's
#      consumer and provider each against an ideal other side, and the
#      ideal pair (ceiling.sh).
#
#   test/bench/all.sh              3 repetitions of 5 s (about 25 minutes)
#   test/bench/all.sh 5 10s        REPS DURATION
#   BEFORE=DIR test/bench/all.sh   also runs the weft and weft-echo binaries
#                                  in DIR as another system (weft@DIR), so
#                                  that a change is measured before and
#                                  after in the same run
#
# Every system of a table runs interleaved with the others (repetition
# outermost), so that what else the machine does hits them alike: quote
# ratios from one run. PEERS_DIR is the peers' folder (default
# ../shared/peers); OUT keeps the raw results (default a new folder under
# ~/.cache/weft-peers). The WASM benchmarks need clang, wasm-ld and
# wat2wasm (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-3}
DUR=${2:-5s}
export PEERS_DIR=${PEERS_DIR:-../shared/peers}
OUT=${OUT:-$HOME/.cache/weft-peers/all-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
weft="weft"
if [ -n "${BEFORE:-}" ]; then
	BEFORE=$(cd "$BEFORE" && pwd)
	for b in weft weft-echo; do
		[ -x "$BEFORE/$b" ] || { echo "all.sh: BEFORE=$BEFORE has no $b" >&2; exit 2; }
	done
	weft="weft@$BEFORE weft"
fi
report=$OUT/report.md
{
	echo "# weft performance, $(date -u +%FT%TZ)"
	echo
	echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GiB;" \
		"$(go version | awk '{print $3}'); weft $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes');" \
		"$REPS repetitions of $DUR each, interleaved."
} >"$report"

section() { # title file: the markdown tables of a step's output
	{
		echo
		echo "## $1"
		echo
		grep '^|' "$2" || echo "(no table: see $2)"
	} >>"$report"
}

echo "== 1/6 peers, 1 KiB echo" >&2
SYSTEMS="$weft kitex grpcgo rawtcp-goroutine" test/bench/peers.sh "$REPS" "$DUR" >"$OUT/peers-1k.txt" 2>&1
section "1 KiB dubbo echo: weft, Kitex, grpc-go, raw TCP" "$OUT/peers-1k.txt"

echo "== 2/6 peers, 16 KiB echo" >&2
SIZE=16384 CONCS="16 100" SYSTEMS="$weft kitex rawtcp-goroutine" test/bench/peers.sh "$REPS" "$DUR" >"$OUT/peers-16k.txt" 2>&1
section "16 KiB dubbo echo: weft, Kitex, raw TCP" "$OUT/peers-16k.txt"
SIZE=262144 CONCS="16" SYSTEMS="$weft kitex" test/bench/peers.sh "$REPS" "$DUR" >"$OUT/peers-256k.txt" 2>&1
section "256 KiB dubbo echo: weft, Kitex" "$OUT/peers-256k.txt"

echo "== 3/6 Triple unary beside grpc-go" >&2
BIN=${BIN:-$HOME/.cache/weft-peers} test/bench/triple-peers.sh "$REPS" "$DUR" >"$OUT/triple.txt" 2>&1
section "Triple unary (1 KiB) beside grpc-go" "$OUT/triple.txt"

echo "== 4/6 Triple streaming beside grpc-go" >&2
(cd test/interop && GOWORK=off go test -run XX -bench StreamOneKiB -benchtime 200000x -count "$REPS") >"$OUT/stream.txt" 2>&1
python3 - "$OUT/stream.txt" >>"$OUT/stream.txt" <<'PY'
import re, sys, statistics
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkStreamOneKiB/(\w+)/([\w-]+?)-\d+\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) MB/s', line)
    if m:
        runs.setdefault((m[1], m[2]), []).append((float(m[3]), float(m[4])))
print('| stream | system | runs | ns per message | MB/s | throughput / grpc-go |')
print('|---|---|---|---|---|---|')
for (kind, name), rs in sorted(runs.items()):
    mbs = statistics.median(r[1] for r in rs)
    g = runs.get((kind, 'grpc-go'))
    ratio = '%.2f' % (mbs / statistics.median(r[1] for r in g)) if g else '-'
    print('| %s | %s | %d | %.0f | %.0f | %s |' % (kind, name, len(rs), statistics.median(r[0] for r in rs), mbs, ratio))
PY
section "Triple streaming, 1 KiB messages on one stream, beside grpc-go" "$OUT/stream.txt"

echo "== 5/6 WASM filters" >&2
go test -run XX -bench 'Filter$' -count "$REPS" ./filters-wasm >"$OUT/wasm.txt" 2>&1
python3 - "$OUT/wasm.txt" >>"$OUT/wasm.txt" <<'PY'
import re, sys, statistics
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'BenchmarkFilter/(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op(?:\s+\d+ B/op\s+(\d+) allocs/op)?', line)
    if m:
        runs.setdefault(m[1], []).append((float(m[2]), m[3] or '-'))
print('| filter | runs | ns per call (median) | min..max | allocs |')
print('|---|---|---|---|---|')
for name, rs in runs.items():
    ns = [r[0] for r in rs]
    print('| %s | %d | %.0f | %.0f..%.0f | %s |' % (name, len(rs), statistics.median(ns), min(ns), max(ns), rs[0][1]))
PY
section "WASM filters, cost per call" "$OUT/wasm.txt"

echo "== 6/6 the one-connection ceiling" >&2
C=16 test/bench/ceiling.sh "$REPS" "$DUR" >"$OUT/ceiling-1k.txt" 2>&1
section "Which side holds c = 16 back, 1 KiB: weft and the ideal other side on one connection" "$OUT/ceiling-1k.txt"
C=16 SIZE=16384 test/bench/ceiling.sh "$REPS" "$DUR" >"$OUT/ceiling-16k.txt" 2>&1
section "Which side holds c = 16 back, 16 KiB" "$OUT/ceiling-16k.txt"

cat "$report"
echo "raw results: $OUT" >&2
