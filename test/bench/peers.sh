#!/usr/bin/env bash
# peers.sh runs the shared peers' matrix in one command: weft beside Kitex,
# grpc-go and raw TCP, interleaved, each c in 1, 16, 100 (bench.sh's
# defaults), and prints the table of medians with CPU per call.
#
#   test/bench/peers.sh            3 repetitions of 10 s
#   test/bench/peers.sh 3 5s       REPS DURATION
#   SYSTEMS="weft kitex" CONCS="16 100" test/bench/peers.sh 3 5s
#   SIZE=16384 CONCS=16 test/bench/peers.sh 3 10s     a 16 KiB echo
#
# PEERS_DIR is the folder with the peers and their bench.sh (default: the
# shared/peers folder beside this checkout). It builds them and weft first;
# the first build downloads their modules and takes minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS_DIR="${PEERS_DIR:-../shared/peers}"
if [ ! -f "$PEERS_DIR/bench.sh" ]; then
	echo "peers.sh: no $PEERS_DIR/bench.sh; set PEERS_DIR to the folder holding the peers (Kitex, grpc-go, raw TCP) and bench.sh" >&2
	exit 2
fi
SIZE="${SIZE:-1024}"
BENCH="$PEERS_DIR/bench.sh"
if [ "$SIZE" != 1024 ]; then
	# bench.sh measures a 1 KiB echo; another size runs a copy of it with
	# every payload scaled: -size for the load generators, and raw TCP's
	# frames as large as a Dubbo echo of SIZE characters (a request body is
	# 160 bytes more than its string, a response 171, as for 1 KiB).
	peers=$(cd "$PEERS_DIR" && pwd)
	BENCH=$(mktemp -d)/bench.sh
	trap 'rm -rf "$(dirname "$BENCH")"' EXIT
	sed -e "s|^HERE=.*|HERE=$peers|" \
		-e 's/-size 1024/-size "$SIZE"/g' \
		-e 's/size=1024 dur/size=$SIZE dur/' \
		-e 's/-mode "\$mode" -max-life 120s/-mode "$mode" -resp-body $((SIZE+171)) -max-life 120s/' \
		-e 's/-c "\$c" -d "\$d" -warmup 2s \\$/-c "$c" -req-body $((SIZE+160)) -resp-body $((SIZE+171)) -d "$d" -warmup 2s \\/' \
		"$PEERS_DIR/bench.sh" >"$BENCH"
	export SIZE
	for want in 'size "$SIZE"' 'resp-body' 'req-body' "HERE=$peers"; do
		grep -q -- "$want" "$BENCH" || { echo "peers.sh: bench.sh changed; cannot scale it to SIZE=$SIZE ($want)" >&2; exit 2; }
	done
fi
bash "$BENCH" build
bash "$BENCH" run "${1:-3}" "${2:-10s}"
