#!/usr/bin/env bash
# Runs the client examples against the demo bridge and checks what each prints against REST.
#
# Each consumer (Python, Node, Go, shell, Swift) follows its own session's event stream while
# documents are inserted, changed and removed through REST; it is stopped (SIGTERM) and its
# printed copy must equal the session's documents as REST returns them. Then, with it stopped,
# more writes are made; restarted with the state file it saved, it must resume with
# Last-Event-ID (no reset, no snapshot) and end equal to REST again. Last, a Python client
# generated from openapi.yaml (openapi-python-client, PyPI) logs in, subscribes, queries and
# calls a method, and its answers are checked against REST.
#
# Installs what is missing: golang, jq, curl, procps (and nodejs if there is no node) from Debian,
# openapi-python-client into .build/openapi-venv. Runs $DDP_BRIDGE_BIN (default the debug build).
# Every wait is bounded; all traffic goes to the demo bridge on 127.0.0.1. EXAMPLES="go shell"
# runs only those consumers (the generated client always runs).
set -euo pipefail
started=$SECONDS
cd "$(dirname "$0")/.."
source scripts/setup.sh
ensure_packages golang jq curl procps
command -v node >/dev/null 2>&1 || ensure_packages nodejs

work=$(mktemp -d)
pid=""
# Says what failed, with what the example being checked printed, and stops.
fail() {
    echo "examples: FAILED: $*" >&2
    for file in "$work"/*.out; do [ -e "$file" ] && { echo "--- $(basename "$file")" >&2; cat "$file" >&2; }; done
    exit 1
}

# Builds: Go (standard library only, nothing fetched), Swift (its own package, no dependencies).
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=
mkdir -p .build/examples
(cd examples/go && test -z "$(gofmt -l .)" && go vet . && go build -o ../../.build/examples/sse-consumer-go .)
swift format lint --strict -r examples/swift/Sources examples/swift/Package.swift
swift build --package-path examples/swift 2>&1 | tail -n 1
node --check examples/sse_consumer.mjs

# The generator for the client of openapi.yaml (PyPI), in a virtual environment of its own.
source scripts/python-envs.sh
pyenv_openapi
venv=.build/openapi-venv

source scripts/demo-bridge.sh
start_demo
case $url in http://127.0.0.1:*) ;; *) fail "the demo bridge is not on 127.0.0.1: $url" ;; esac
# start_demo's trap stops the bridge; ours stops a running example first and removes $work.
eval "set -- $(trap -p EXIT)"
demo_cleanup=$3
trap '[ -z "$pid" ] || kill -KILL -- "-$pid" 2>/dev/null || true; rm -rf "$work"; eval "$demo_cleanup"' EXIT

# METHOD PATH TOKEN [BODY]: the JSON answer; a status other than 2xx fails.
api() {
    curl -sS --fail-with-body --max-time 10 -X "$1" "$url$2" -H "Authorization: Bearer $3" ${4:+-d "$4"}
}
# A new session, logged in as the demo's alice: its token.
login() {
    curl -sS --fail-with-body --max-time 10 -X POST "$url/v1/sessions" -d '{"username":"alice","password":"secret"}' | jq -r .token
}
# DOCUMENT: inserts it into tasks through the writer's session; its id.
insert() { api POST /v1/collections/tasks "$writer" "$1" | jq -r .id; }

# TOKEN: the session's documents as REST returns them, {collection: {id: fields}}.
rest_state() {
    local state='{}' name
    for name in $(api GET /v1/collections "$1" | jq -r '.[].name'); do
        state=$(jq -c --arg name "$name" --argjson page "$(api GET "/v1/collections/$name?limit=100000" "$1")" \
            '.[$name] = ($page.documents | map({key: ._id, value: del(._id)}) | from_entries)' <<<"$state")
    done
    echo "$state"
}
# A: B: whether two copies hold the same documents (key order and emptied collections aside).
same() { jq -en --argjson a "$1" --argjson b "$2" 'def n: with_entries(select(.value != {})); ($a | n) == ($b | n)' >/dev/null; }
# FILE: the last copy an example printed (its last line of JSON), documents only.
printed_copy() { grep '^{' "$1" | tail -n 1 | jq -c .documents; }
# FILE: the event names an example printed ("id event data" lines, or the shell's JSON lines).
events_in() { { awk '!/^\{/ && NF >= 3 { print $2 }' "$1"; jq -Rr 'fromjson? | .event // empty' "$1"; } | sort -u | tr '\n' ' '; }

command_of() {
    case $1 in
        python) cmd=(python3 examples/sse_consumer.py) ;;
        node) cmd=(node examples/sse_consumer.mjs) ;;
        go) cmd=(.build/examples/sse-consumer-go) ;;
        shell) cmd=(examples/sse_consumer.sh) ;;
        swift) cmd=(examples/swift/.build/debug/sse-consumer) ;;
    esac
}
# NAME RUN TOKEN: starts the example in a process group of its own (setsid), so that stopping
# it reaches all its processes (the shell example's curl and jq too).
start_example() {
    command_of "$1"
    setsid "${cmd[@]}" "$url" "$3" "$work/$1.state" >"$work/$1.$2.out" 2>&1 &
    pid=$!
}
# Sends SIGTERM to the example's process group and waits (10 s at most) for it to exit.
stop_example() {
    [ -n "$pid" ] || return 0
    [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" = "$pid" ] || fail "example $pid is not in a process group of its own"
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL -- "-$pid" 2>/dev/null || true
        fail "example $pid still running 10 s after SIGTERM"
    fi
    wait "$pid" || true # 0, or 143 for the shell pipeline ended by the signal
    pid=""
}
# NAME TOKEN: waits (20 s at most) until the copy the example saved equals REST's.
caught_up() {
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || fail "$1 exited early"
        if [ -s "$work/$1.state" ] && same "$(jq -c .documents "$work/$1.state" 2>/dev/null || echo null)" "$(rest_state "$2")"; then
            return 0
        fi
        sleep 0.1
    done
    fail "$1: its copy did not reach REST's state within 20 s (REST: $(rest_state "$2"))"
}
# NAME RUN TOKEN: the copy the example printed when stopped must equal REST's.
check_printed() {
    local printed rest
    printed=$(printed_copy "$work/$1.$2.out") || fail "$1 ($2): no copy printed"
    rest=$(rest_state "$3")
    same "$printed" "$rest" || fail "$1 ($2): printed $printed, REST has $rest"
}
# NAME RUN EVENT…: the example printed each of these events.
expect_events() {
    local name=$1 run=$2 seen event
    shift 2
    seen=" $(events_in "$work/$name.$run.out")"
    for event in "$@"; do [[ $seen == *" $event "* ]] || fail "$name ($run): no $event event (saw:$seen)"; done
}

writer=$(login)
passed=0
for name in ${EXAMPLES:-python node go shell swift}; do
    list="examples-$name"
    token=$(login)
    api POST /v1/subscriptions "$token" "{\"name\":\"tasks\",\"params\":[{\"listId\":\"$list\"}]}" >/dev/null

    # Run 1, live: three inserts, then a change (one field set, one cleared) and a removal.
    start_example "$name" live "$token"
    caught_up "$name" "$token"
    a=$(insert "{\"text\":\"$name a\",\"listId\":\"$list\",\"done\":false,\"due\":{\"\$date\":1767225600000}}")
    b=$(insert "{\"text\":\"$name b\",\"listId\":\"$list\",\"done\":false,\"note\":\"to clear\"}")
    c=$(insert "{\"text\":\"$name c\",\"listId\":\"$list\",\"done\":false,\"tags\":[\"x\",\"y\"]}")
    caught_up "$name" "$token"
    api PATCH "/v1/collections/tasks/$b" "$writer" '{"$set":{"done":true},"$unset":{"note":""}}' >/dev/null
    api DELETE "/v1/collections/tasks/$a" "$writer" >/dev/null
    caught_up "$name" "$token"
    stop_example
    check_printed "$name" live "$token"
    expect_events "$name" live snapshot added changed removed

    # Stopped: a change, an insert and a removal it must catch up with when it resumes.
    api PATCH "/v1/collections/tasks/$c" "$writer" "{\"\$set\":{\"text\":\"$name c, edited while stopped\"},\"\$push\":{\"tags\":\"z\"}}" >/dev/null
    insert "{\"text\":\"$name d\",\"listId\":\"$list\",\"done\":false}" >/dev/null
    api DELETE "/v1/collections/tasks/$b" "$writer" >/dev/null

    # Run 2: resumed from its state file with Last-Event-ID, replayed, not reset.
    start_example "$name" resumed "$token"
    caught_up "$name" "$token"
    stop_example
    check_printed "$name" resumed "$token"
    expect_events "$name" resumed added changed removed
    if [[ " $(events_in "$work/$name.resumed.out")" =~ \ (reset|snapshot)\  ]]; then
        fail "$name (resumed): got a reset or snapshot instead of a replay"
    fi
    echo "examples: $name: copy == REST after live writes ($(events_in "$work/$name.live.out" | xargs)) and after resuming ($(events_in "$work/$name.resumed.out" | xargs)): $(printed_copy "$work/$name.resumed.out" | jq -c 'map_values(length)')"
    rm -f "$work/$name".*.out
    passed=$((passed + 1))
done

# The generated client. openapi-python-client must accept openapi.yaml whole: any warning
# means a part of the API is missing or mistyped in the client (it leaves out an operation that
# refers to a parameter of components/parameters given by `content`, for one).
if ! warnings=$(PATH="$PWD/$venv/bin:$PATH" openapi-python-client generate --path openapi.yaml --meta none \
    --output-path .build/openapi-client/ddp_bridge_client --overwrite --fail-on-warning 2>&1); then
    grep -v '^$' <<<"$warnings" >&2
    fail "openapi-python-client did not accept openapi.yaml whole (above)"
fi
api POST /v1/subscriptions "$writer" '{"name":"tasks","params":[{"listId":"work"}]}' >/dev/null
generated=$(PYTHONPATH=.build/openapi-client timeout 60 "$venv/bin/python" examples/openapi_client.py "$url") ||
    fail "the generated client failed: $generated"
expected=$(jq -cn \
    --argjson session "$(api GET /v1/session "$writer")" \
    --argjson work "$(api GET '/v1/collections/tasks?selector=%7B%22listId%22%3A%22work%22%7D' "$writer")" \
    --argjson open "$(api GET '/v1/collections/tasks?selector=%7B%22listId%22%3A%22work%22%2C%22done%22%3Afalse%7D&sort=%7B%22text%22%3A1%7D' "$writer")" \
    '{userId: $session.userId, subscription: {name: "tasks", params: [{listId: "work"}], state: "ready"},
      documents: $work.documents, notDone: [$open.documents[]._id], echo: ["hello", {"$date": 1700000000000}],
      session: {userId: $session.userId, connection: "connected", subscriptions: 1}}')
same "$generated" "$expected" || fail "the generated client printed $generated, expected $expected"
echo "examples: generated client (openapi-python-client $openapi_generator): session, subscribe, query, method call == REST"
passed=$((passed + 1))

echo "examples: took $((SECONDS - started)) s"
echo "examples: $passed passed, 0 failed"
