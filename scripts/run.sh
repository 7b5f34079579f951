#!/usr/bin/env bash
# Runs the four Zest services on loopback from bin/, data under ./data (or $ZEST_DATA_DIR),
# and stops all four on Ctrl-C or SIGTERM. Used by `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."
export ZEST_DATA_DIR="${ZEST_DATA_DIR:-$PWD/data}"
mkdir -p "$ZEST_DATA_DIR"
chmod 700 "$ZEST_DATA_DIR"

# The tool host takes calls only from mcpgateway, with the service key; a fresh random one
# per run unless the environment sets it (nothing else holds it: it is never written down).
if [ -z "${ZEST_SERVICE_KEY:-}" ]; then
  ZEST_SERVICE_KEY="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
  export ZEST_SERVICE_KEY
fi

# The console needs the admin key to register servers. With none set, this run makes one
# (administration stays closed to anyone without it) and prints the console's link with it in
# the URL's fragment, which the browser keeps for the tab and never sends to a server.
generated_admin_key=""
if [ -z "${LEMONADE_ADMIN_API_KEY:-}" ] && [ -z "${LEMONADE_API_KEY:-}" ]; then
  LEMONADE_ADMIN_API_KEY="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
  export LEMONADE_ADMIN_API_KEY
  generated_admin_key="$LEMONADE_ADMIN_API_KEY"
fi

bin="${ZEST_BIN_DIR:-bin}"
pids=()
signalled=0
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping Zest (pids ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "stopped"
}
trap 'signalled=1; stop' INT TERM
trap stop EXIT

# A supervisor (the e2e test) may hand over the listening sockets: ZEST_LISTEN_FD_ZEST_GATEWAY=N
# and the like name an inherited descriptor; the service gets it as fd 3 with LISTEN_FDS=1
# (lib/listen) and none of the others.
handed=()
for svc in zest-inference zest-toolhost zest-mcpgateway zest-gateway; do
  var="ZEST_LISTEN_FD_${svc//-/_}"; var="${var^^}"
  fd="${!var:-}"
  [ -z "$fd" ] && continue
  if [[ ! "$fd" =~ ^[0-9]+$ ]]; then
    echo "$var=$fd: want the number of an inherited file descriptor" >&2
    exit 2
  fi
  handed+=("$fd")
done
# start runs one service; it keeps only its own handed-over socket (as fd 3), if any.
start() {
  local var="ZEST_LISTEN_FD_${1//-/_}"; var="${var^^}"
  local fd="${!var:-}"
  (
    [ -n "$fd" ] && exec 3<&"$fd"
    for f in "${handed[@]}"; do
      if [ -z "$fd" ] || [ "$f" != 3 ]; then exec {f}<&-; fi
    done
    if [ -n "$fd" ]; then export LISTEN_FDS=1; fi
    # The tool host needs neither Lemonade key, and its servers must not be able to read
    # them: it would drop them itself, with a warning.
    if [ "$1" = zest-toolhost ]; then unset LEMONADE_API_KEY LEMONADE_ADMIN_API_KEY; fi
    exec "$bin/$1"
  ) &
}

# Start order: dependencies first (clients connect lazily, so order is only for tidy logs).
for svc in zest-inference zest-toolhost zest-mcpgateway zest-gateway; do
  start "$svc"
  pids+=("$!")
done
for f in "${handed[@]}"; do exec {f}<&-; done

edge="${ZEST_EDGE_ADDR:-127.0.0.1:13305}"
for _ in $(seq 1 100); do
  curl -fsS "http://$edge/live" >/dev/null 2>&1 && break
  sleep 0.1
done
auth=""
# Double quotes, so that the shell the lines are pasted into expands the variable.
[ -n "${LEMONADE_API_KEY:-}" ] && auth=" -H \"authorization: Bearer \$LEMONADE_API_KEY\""
if [ -n "$generated_admin_key" ]; then
  console="Console: http://$edge/#key=$generated_admin_key
  (an admin key made for this run, since LEMONADE_ADMIN_API_KEY was not set; it ends with Ctrl-C)"
else
  console="Console: http://$edge/  (it asks for the admin key: LEMONADE_ADMIN_API_KEY, or LEMONADE_API_KEY)"
fi
cat <<MSG

Zest is up at http://$edge  (data in $ZEST_DATA_DIR; Ctrl-C stops everything)
$console
Try:
  curl -s http://$edge/api/v1/health$auth
  curl -si http://$edge/mcp$auth -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
  # then repeat the Mcp-Session-Id header it returned:
  curl -s http://$edge/mcp$auth -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \\
    -H "mcp-session-id: <id>" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'

MSG
# Wait until any service exits (or a signal arrives); the EXIT trap stops the rest.
wait -n "${pids[@]}" || true
[ "$signalled" = 1 ] || echo "a service exited; stopping the others" >&2
