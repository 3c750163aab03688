#!/usr/bin/env bash
# peers.sh runs the shared peers' matrix in one command: weft beside Kitex,
# grpc-go and raw TCP, interleaved, each c in 1, 16, 100 (bench.sh's
# defaults), and prints the table of medians with CPU per call.
#
#   test/bench/peers.sh            3 repetitions of 10 s
#   test/bench/peers.sh 3 5s       REPS DURATION
#   SYSTEMS="weft kitex" CONCS="16 100" test/bench/peers.sh 3 5s
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
bash "$PEERS_DIR/bench.sh" build
bash "$PEERS_DIR/bench.sh" run "${1:-3}" "${2:-10s}"
