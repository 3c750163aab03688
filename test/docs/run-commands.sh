#!/usr/bin/env bash
# Runs every shell command the documentation shows, as written, from the
# repository's root, and fails listing file:line, the command and its output
# for each one that fails (a step of ./test.sh, so CI runs it):
#
#   test/docs/run-commands.sh [--list] [FILE.md...]   (default: README.md docs/*.md)
#
# --list prints what would run, skip or wait, and runs nothing.
#
# What is a command:
#   ```sh, ```bash, ```shell  every line; `\` at a line's end continues it;
#                             blank lines and lines starting with # are not
#   ```console                the lines starting with "$ "; the others are
#                             output
#   any other fenced or indented block is not run; an untagged or indented
#   block whose first line starts like a command (go, ./x, curl, weft, $ ...)
#   fails the check: tag it ```sh (or ```text when it is output), so that no
#   command escapes the check by its formatting.
#
# A command ending in `&` is a server: it starts in a process group of its
# own, the check waits (bounded) until the 127.0.0.1:PORT addresses it names
# answer, the block's next commands run against it, and it is stopped when
# its block ends. Each of those addresses must be free before it starts: a
# port another process holds would have the docs' commands talk to that one.
#
# Markers, HTML comments on the lines just before a block (invisible once
# rendered):
#   <!-- docs-check: skip: REASON -->  the block's commands are not run; each
#                                      is printed with REASON and counted
#   <!-- docs-check: wait=ADDR -->     ADDR must not answer before the
#                                      block's first background command, and
#                                      must answer after its last: HOST:PORT
#                                      (a TCP connect) or an http:// URL (a
#                                      2xx answer, e.g. QoS's /ready);
#                                      repeatable
# A background command with nothing to wait for fails the check.
# Skip only what cannot run here (an interactive session, a command that
# would recurse into this check), never what merely takes long.
#
# The docs write `weft` and `grpcurl` as installed commands: the check puts
# both on PATH, weft built from ./apps/weft (what `go install ./apps/weft`
# gives) and grpcurl from test/grpc-interop's pin. Commands run with the
# repository's go.work (GOWORK unset, whatever test.sh exports), stdin from
# /dev/null, each bounded by DOCS_CHECK_TIMEOUT seconds (default 900); a
# server's addresses by DOCS_CHECK_WAIT seconds (default 120: a first go run
# compiles).
set -uo pipefail
cd "$(dirname "$0")/../.."
unset GOWORK
CMD_TIMEOUT=${DOCS_CHECK_TIMEOUT:-900}
WAIT=${DOCS_CHECK_WAIT:-120}

LIST=0
if [ "${1:-}" = --list ]; then
	LIST=1
	shift
fi
if (($# == 0)); then
	set -- README.md docs/*.md
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/docs-check.XXXXXX")
BGPIDS=()
BGLOGS=()
BGWHERE=()
FGPID=
cleanup() {
	# The command in the foreground when the check is interrupted: timeout
	# passes the signal on to the command's process group.
	[ -n "$FGPID" ] && kill -TERM "$FGPID" 2>/dev/null && wait "$FGPID" 2>/dev/null
	stop_servers
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# extract FILE: one record a line, fields separated by \037:
#   B file line lang skip-reason waits   a block with commands
#   C line command                       one command of that block
#   X file line message                  a mistake in the docs' source
# The blocks' commands follow their B line.
extract() {
	awk -v US=$'\037' '
	function err(l, msg) { print "X" US FILENAME US l US msg }
	# looks like a shell command: the lint for blocks that are not run
	function cmdlike(s,   a) {
		sub(/^[ \t]+/, "", s)
		if (s ~ /^\$ /) return 1
		split(s, a, /[ \t]+/)
		if (a[1] ~ /^(go|bash|sh|curl|grpcurl|weft|telnet|nc|git|make|docker|kubectl|npm|npx|cargo|protoc|cd|export|sudo|apt-get|java)$/) return 1
		if (a[1] ~ /^(\.\.?)?\/[^ ]/ || a[1] ~ /\.sh$/ || a[1] ~ /^[A-Za-z_][A-Za-z0-9_]*=/) return 1
		return 0
	}
	function flush() {
		if (cmd != "") print "C" US cmdline US cmd
		cmd = ""; cont = 0
	}
	function add(l, s) {
		if (cont) cmd = cmd " " s
		else { cmd = s; cmdline = l }
		cont = (cmd ~ /\\$/)
		if (cont) sub(/\\$/, "", cmd)
		else flush()
	}
	BEGIN { prevblank = 1 }
	{
		line = $0
		if (fence != "") {
			if (line ~ ("^ ? ? ?" fence "+[ \t]*$")) {
				if (cont) { err(cmdline, "a command ends in \\ at the end of its block"); cmd = ""; cont = 0 }
				if (run && !ncmds && bmarked) err(start, "a docs-check marker before a block with no commands")
				if (lang == "" && first != "" && cmdlike(first)) err(firstline, "a command in an untagged code block: tag it ```sh (```text if it is output)")
				fence = ""; prevblank = 0
				next
			}
			if (first == "" && line !~ /^[ \t]*$/) { first = line; firstline = FNR }
			if (!run) next
			if (lang == "console") {
				if (cont) add(FNR, line)
				else if (line ~ /^\$ /) { add(FNR, substr(line, 3)); ncmds++ }
			} else if (cont) add(FNR, line)
			else if (line !~ /^[ \t]*(#.*)?$/) { add(FNR, line); ncmds++ }
			next
		}
		if (line ~ /^ ? ? ?(```|~~~)/) {
			match(line, /(`+|~+)/)
			fence = substr(line, RSTART, 1)
			fence = (fence == "`") ? "```" : "~~~"
			lang = substr(line, RSTART + RLENGTH)
			sub(/^[ \t]+/, "", lang); sub(/[ \t].*$/, "", lang)
			run = (lang ~ /^(sh|bash|shell|console)$/)
			if (!run && (skip != "" || waits != "")) err(FNR, "a docs-check marker before a ```" lang " block, which is not run")
			start = FNR; first = ""; ncmds = 0; cmd = ""; cont = 0
			if (run) print "B" US FILENAME US FNR US lang US skip US waits
			bmarked = marked; skip = ""; waits = ""; marked = 0
			next
		}
		if (line ~ /<!--[ \t]*docs-check/) {
			if (line !~ /^[ \t]*<!--[ \t]*docs-check:.*-->[ \t]*$/) { err(FNR, "a docs-check marker is one line: <!-- docs-check: ... -->"); next }
			m = line
			sub(/^[ \t]*<!--[ \t]*docs-check:[ \t]*/, "", m); sub(/[ \t]*-->[ \t]*$/, "", m)
			if (m ~ /^skip:/) {
				sub(/^skip:[ \t]*/, "", m)
				if (m == "") err(FNR, "docs-check: skip needs a reason (skip: REASON)")
				skip = m
			} else {
				n = split(m, w, /[ \t]+/)
				for (i = 1; i <= n; i++) {
					if (w[i] ~ /^wait=[^ ]+$/) waits = waits (waits == "" ? "" : " ") substr(w[i], 6)
					else err(FNR, "unknown docs-check marker \"" w[i] "\" (known: skip: REASON, wait=HOST:PORT or wait=URL)")
				}
			}
			marked = 1
			next
		}
		if (line ~ /^[ \t]*$/) { prevblank = 1; next }
		if (marked) { err(FNR, "a docs-check marker not directly before a code block"); skip = ""; waits = ""; marked = 0 }
		# An indented code block: a blank line, then four spaces or a tab.
		if (prevblank && !inind && line ~ /^(    |\t)/ && cmdlike(line))
			err(FNR, "a command in an indented code block: put it in a ```sh block")
		inind = (line ~ /^(    |\t)/) && (prevblank || inind)
		prevblank = 0
	}
	END {
		if (fence != "") err(start, "a code block that is never closed")
		if (marked) err(NR, "a docs-check marker at the end of the file")
	}' "$1"
}

# group_alive PGID: whether a process of that group is still running (a
# zombie does not count).
group_alive() {
	local f s rest state pgrp
	for f in /proc/[0-9]*/stat; do
		{ read -r s <"$f"; } 2>/dev/null || continue
		rest=${s##*) }
		read -r state _ pgrp _ <<<"$rest"
		[ "$pgrp" = "$1" ] && [ "$state" != Z ] && return 0
	done
	return 1
}

stop_servers() {
	local pid i
	for pid in "${BGPIDS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null
	done
	for pid in "${BGPIDS[@]}"; do
		for ((i = 0; i < 75; i++)); do
			group_alive "$pid" || break
			sleep 0.2
		done
		if group_alive "$pid"; then
			echo "   server $pid did not stop in 15 s after SIGTERM: killed"
			kill -KILL -- "-$pid" 2>/dev/null
			for ((i = 0; i < 25; i++)); do
				group_alive "$pid" || break
				sleep 0.2
			done
		fi
		wait "$pid" 2>/dev/null
	done
	BGPIDS=()
	BGLOGS=()
	BGWHERE=()
}

# answers ADDR: HOST:PORT accepts a connection, or an http:// URL answers 2xx.
answers() {
	case $1 in
	http://* | https://*) curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null ;;
	*) timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${1%:*}" "${1##*:}" 2>/dev/null ;;
	esac
}

# hostport ADDR: the HOST:PORT of an address or URL.
hostport() {
	local a=${1#*://}
	a=${a%%/*}
	case $1 in
	http://*) [[ $a == *:* ]] || a=$a:80 ;;
	https://*) [[ $a == *:* ]] || a=$a:443 ;;
	esac
	echo "$a"
}

NRUN=0
NSKIP=0
FAILS=()
SKIPS=()
START=$SECONDS

# fail WHERE CMD WHY [OUTPUT-FILE]: reports one failure, with the command's
# output and that of the block's servers.
fail() {
	local where=$1 cmd=$2 why=$3 out=${4:-} i
	FAILS+=("$where: $cmd ($why)")
	echo "FAIL $where: $cmd"
	echo "     $why"
	if [ -s "$out" ]; then
		echo "     --- its output (last 100 lines)"
		tail -n 100 "$out" | sed 's/^/     | /'
	fi
	for i in "${!BGLOGS[@]}"; do
		[ "${BGLOGS[$i]}" != "$out" ] && [ -s "${BGLOGS[$i]}" ] || continue
		echo "     --- output of the server started at ${BGWHERE[$i]} (last 100 lines)"
		tail -n 100 "${BGLOGS[$i]}" | sed 's/^/     | /'
	done
}

# Every record of every file first: mistakes in the source fail before
# anything runs.
REC=$TMP/records
for f in "$@"; do
	[ -f "$f" ] || {
		echo "docs check: no file $f" >&2
		exit 2
	}
	extract "$f"
done >"$REC"

# The README's first lines give the run and the test command.
if [[ " $* " == *" README.md "* ]]; then
	if ! awk -F$'\037' '$1=="B" {f=$2} $1=="C" && f=="README.md" && $2<=15 && $3 ~ /^go run / {r=1} $1=="C" && f=="README.md" && $2<=15 && $3=="./test.sh" {t=1} END {exit !(r&&t)}' "$REC"; then
		FAILS+=("README.md: its first lines no longer give the run (go run ...) and the test command (./test.sh) as commands")
		echo "FAIL README.md: the first 15 lines must give the run command (go run ...) and the test command (./test.sh)"
	fi
fi
while IFS=$'\037' read -r kind file line msg; do
	[ "$kind" = X ] || continue
	FAILS+=("$file:$line: $msg")
	echo "FAIL $file:$line: $msg"
done <"$REC"

# The tools the docs write as installed commands, built once if used.
BIN=$TMP/bin
mkdir -p "$BIN"
export PATH="$BIN:$PATH"
uses() { awk -F$'\037' -v re="$1" '$1=="B" {skip=($5!="")} $1=="C" && !skip && $3 ~ re {found=1} END {exit !found}' "$REC"; }
if ((!LIST)); then
	if uses '(^|[;&|(][ \t]*)weft[ \t]'; then
		echo "== building weft from ./apps/weft, for the docs' weft commands"
		go build -o "$BIN/weft" ./apps/weft || FAILS+=("tools: go build ./apps/weft failed: the docs' weft commands cannot run")
	fi
	if uses '(^|[;&|(][ \t]*)grpcurl[ \t]'; then
		echo "== building grpcurl from test/grpc-interop's pin, for the docs' grpcurl commands"
		(cd test/grpc-interop && GOWORK=off go build -o "$BIN/grpcurl" github.com/fullstorydev/grpcurl/cmd/grpcurl) ||
			FAILS+=("tools: building grpcurl in test/grpc-interop failed: the docs' grpcurl commands cannot run")
	fi
fi

# is_bg CMD: whether CMD ends in & (before a comment); BASH_REMATCH[1] is
# then the command without it.
is_bg() {
	[[ $1 =~ ^(.*[^\&])\&[[:space:]]*(#.*)?$ ]]
}

# run_block: runs the commands collected in CMDS/LINES for the block at
# BFILE:BLINE, with BSKIP and BWAITS from its markers.
run_block() {
	local i cmd where out pid bgcmd addr t deadline ok firstbg=-1 lastbg=-1
	local -a targets fresh
	# The block's wait= markers: free before its first background command,
	# awaited after its last.
	for i in "${!CMDS[@]}"; do
		if is_bg "${CMDS[$i]}"; then
			((firstbg < 0)) && firstbg=$i
			lastbg=$i
		fi
	done
	for i in "${!CMDS[@]}"; do
		cmd=${CMDS[$i]}
		where=$BFILE:${LINES[$i]}
		if [ -n "$BSKIP" ]; then
			echo "SKIP $where: $cmd"
			echo "     reason: $BSKIP"
			SKIPS+=("$where: $cmd ($BSKIP)")
			((NSKIP++))
			continue
		fi
		out=$TMP/out.$((NRUN + 1))
		if is_bg "$cmd"; then
			bgcmd=${BASH_REMATCH[1]}
			targets=($(grep -o '127\.0\.0\.1:[0-9]\+' <<<"$bgcmd"))
			fresh=("${targets[@]}")
			((i == firstbg)) && fresh+=($BWAITS)
			((i == lastbg)) && targets+=($BWAITS)
			if ((LIST)); then
				echo "bg   $where: $cmd"
				echo "     waits for: ${targets[*]:-(nothing: a mistake)}"
				continue
			fi
			((NRUN++))
			if ((${#targets[@]} == 0)); then
				fail "$where" "$cmd" "a background command names no 127.0.0.1:PORT to wait for: add <!-- docs-check: wait=HOST:PORT --> before its block"
				return
			fi
			for addr in "${fresh[@]}"; do
				if answers "$(hostport "$addr")"; then
					fail "$where" "$cmd" "$(hostport "$addr") already answers before the command started: another process holds it (stop it, or the docs' commands would talk to it)"
					return
				fi
			done
			t=$SECONDS
			setsid bash -c "$bgcmd" </dev/null >"$out" 2>&1 &
			pid=$!
			BGPIDS+=("$pid")
			BGLOGS+=("$out")
			BGWHERE+=("$where")
			deadline=$((SECONDS + WAIT))
			for addr in "${targets[@]}"; do
				ok=0
				while ((SECONDS < deadline)); do
					if answers "$addr"; then
						ok=1
						break
					fi
					group_alive "$pid" || break
					sleep 0.5
				done
				if ((!ok)); then
					if group_alive "$pid"; then
						fail "$where" "$cmd" "$addr did not answer within ${WAIT} s" "$out"
					else
						fail "$where" "$cmd" "it exited before $addr answered" "$out"
					fi
					return
				fi
			done
			echo "ok   $where ($((SECONDS - t)) s to answer ${targets[*]}): $cmd"
			continue
		fi
		if ((LIST)); then
			echo "run  $where: $cmd"
			continue
		fi
		((NRUN++))
		t=$SECONDS
		# In the background and waited for, so that a signal to this
		# script is handled (cleanup) without waiting for the command.
		timeout -k 10 "$CMD_TIMEOUT" bash -c "$cmd" </dev/null >"$out" 2>&1 &
		FGPID=$!
		wait "$FGPID"
		local rc=$?
		FGPID=
		if ((rc != 0)); then
			local why="exit status $rc"
			((rc == 124)) && why="timed out after ${CMD_TIMEOUT} s"
			fail "$where" "$cmd" "$why" "$out"
			return
		fi
		echo "ok   $where ($((SECONDS - t)) s): $cmd"
	done
}

CMDS=()
LINES=()
BFILE=
end_block() {
	if [ -n "$BFILE" ] && ((${#CMDS[@]})); then
		run_block
		stop_servers
	fi
	CMDS=()
	LINES=()
	BFILE=
}
while IFS=$'\037' read -r -u 3 kind a b c d e; do
	case $kind in
	B)
		end_block
		BFILE=$a BLINE=$b BSKIP=$d BWAITS=$e
		;;
	C)
		LINES+=("$a")
		CMDS+=("$b")
		;;
	esac
done 3<"$REC"
end_block

echo
((LIST)) && echo "(--list: nothing was run)"
echo "docs check: $NRUN command(s) run, ${#FAILS[@]} failure(s), $NSKIP skipped, $((SECONDS - START)) s"
if ((NSKIP)); then
	echo "skipped (a docs-check: skip marker gives the reason):"
	printf '  %s\n' "${SKIPS[@]}"
fi
if ((${#FAILS[@]})); then
	echo "failed:"
	printf '  %s\n' "${FAILS[@]}"
	exit 1
fi
