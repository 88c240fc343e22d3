# Runs a Python driver that starts processes (recording each process group in $work/pids), with
# a working folder and a time limit, and cleans up whatever happens: on exit, Ctrl-C or TERM the
# driver is stopped (it stops its processes), then any recorded process group still there is
# killed, and the folder removed (kept when KEEP_WORK is set). Sourced by the scripts that run
# the failover, TLS front and proxy drivers.
#
#   run_driver <folder name prefix> <seconds> <command...>   (the command gets --work <folder>)

run_driver() {
    local prefix=$1 seconds=$2
    shift 2
    work=$(mktemp -d "/tmp/$prefix.XXXXXX")
    driver=""
    trap _driver_cleanup EXIT
    trap 'exit 130' INT TERM
    timeout --kill-after=5 "$seconds" "$@" --work "$work" &
    driver=$!
    wait "$driver"
}

_driver_cleanup() {
    local code=$? pgid
    trap - EXIT INT TERM
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
        kill -TERM "$driver" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$driver" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$driver" 2>/dev/null || true
    fi
    if [ -f "$work/pids" ]; then
        while read -r pgid; do
            kill -0 -- "-$pgid" 2>/dev/null && kill -KILL -- "-$pgid" 2>/dev/null || true
        done <"$work/pids"
    fi
    if [ -n "${KEEP_WORK:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
    exit "$code"
}
