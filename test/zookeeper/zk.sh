#!/usr/bin/env bash
# zk.sh starts and stops a standalone ZooKeeper server for the ZooKeeper
# registry tests (registry-zookeeper, test/interop), from Debian's
# `zookeeper` package (/usr/share/java/zookeeper.jar; needs `java`). It
# listens on 127.0.0.1 only, keeps its data and log in DIR, and runs no
# admin HTTP server (ZooKeeper 3.5+ would open one on 0.0.0.0:8080).
#
#   test/zookeeper/zk.sh start DIR   start in the background (config, data and
#                                    DIR/zookeeper.log in DIR), wait until it
#                                    answers, print the pid
#   test/zookeeper/zk.sh stop DIR    stop the server started from DIR
#
# Both are idempotent: start prints the running pid when the server already
# answers, stop is quiet when nothing runs. A restart keeps the data (and the
# sessions ZooKeeper logged), as a real server restart does; ZK_FRESH=1
# start begins from an empty tree. Then:
#
#   ZOOKEEPER_TEST_ADDR=127.0.0.1:2181 ZOOKEEPER_TEST_DIR=DIR go test -race ./registry-zookeeper/
#
# Environment: ZK_PORT (default 2181), ZK_JAR (default
# /usr/share/java/zookeeper.jar), ZK_START_TIMEOUT (seconds, default 60).
set -euo pipefail

PORT=${ZK_PORT:-2181}
JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
START_TIMEOUT=${ZK_START_TIMEOUT:-60}

usage() {
	echo "usage: $0 start|stop DIR" >&2
	exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
PIDFILE=$DIR/zookeeper.pid
LOG=$DIR/zookeeper.log
CFG=$DIR/zoo.cfg

log() { echo "zk.sh: $*" >&2; }

# ready: the server answers the ruok four-letter word with imok (bash's
# /dev/tcp: no netcat needed).
ready() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo ruok >&3 && grep -q imok <&3" 2>/dev/null
}

# running_pid, wait_ready and stop.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh"

write_config() {
	# tickTime 500 ms lets the tests ask for sessions as short as 1 s
	# (minSessionTimeout is 2 ticks by default); maxSessionTimeout 60 s
	# keeps Dubbo's default session (60000 ms) as asked.
	cat >"$CFG" <<CFG
tickTime=500
dataDir=$DIR/data
clientPort=$PORT
clientPortAddress=127.0.0.1
minSessionTimeout=1000
maxSessionTimeout=60000
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
CFG
}

start() {
	command -v java >/dev/null || { log "java not found: install default-jre-headless (Debian's zookeeper package depends on it)"; exit 1; }
	[ -f "$JAR" ] || { log "$JAR missing: install Debian's zookeeper package (apt-get install zookeeper)"; exit 1; }
	local pid
	if pid=$(running_pid); then
		if ready; then
			echo "$pid"
			return
		fi
	elif ready; then
		log "something else already answers on 127.0.0.1:$PORT"
		exit 1
	fi
	if [ -z "${pid:-}" ]; then
		if [ "${ZK_FRESH:-}" = 1 ]; then
			rm -rf "$DIR/data"
		fi
		mkdir -p "$DIR/data"
		write_config
		# The jar's manifest names its dependencies (Debian's layout);
		# /etc/zookeeper/conf supplies the logging configuration.
		(cd "$DIR" && exec nohup java -Xmx256m -Dzookeeper.log.dir="$DIR" -Dzookeeper.root.logger=INFO,CONSOLE \
			-cp "/etc/zookeeper/conf:$JAR" org.apache.zookeeper.server.ZooKeeperServerMain "$CFG" \
			>>"$LOG" 2>&1 </dev/null) &
		pid=$!
		echo "$pid" >"$PIDFILE"
	fi
	wait_ready "$pid"
}


case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
