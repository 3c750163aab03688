# daemon.sh: what the scripts that run a test server in the background
# (test/nacos/polaris.sh, test/zookeeper/zk.sh) share. Source it after
# setting PIDFILE, LOG and START_TIMEOUT and defining log and ready (the
# server's own readiness check).

# running_pid prints the pid of the server PIDFILE names while it lives.
running_pid() {
	[ -f "$PIDFILE" ] || return 1
	local pid
	pid=$(cat "$PIDFILE")
	kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

# wait_ready waits until ready succeeds for the server PID, and prints the
# pid; it exits with the log's last lines when the server dies or is not
# ready within START_TIMEOUT seconds.
wait_ready() {
	local pid=$1
	local deadline=$((SECONDS + START_TIMEOUT))
	until ready; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "server exited; last lines of $LOG:"
			tail -n 30 "$LOG" >&2
			rm -f "$PIDFILE"
			exit 1
		fi
		if [ $SECONDS -ge $deadline ]; then
			log "not ready after ${START_TIMEOUT}s; last lines of $LOG:"
			tail -n 30 "$LOG" >&2
			exit 1
		fi
		sleep 0.2
	done
	echo "$pid"
}

# stop sends the server SIGTERM, and SIGKILL after 15 s; quiet when none
# runs.
stop() {
	local pid
	if ! pid=$(running_pid); then
		rm -f "$PIDFILE"
		return
	fi
	kill "$pid"
	local deadline=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			log "pid $pid ignored SIGTERM, killing"
			kill -9 "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	rm -f "$PIDFILE"
}
