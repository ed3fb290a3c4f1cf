#!/usr/bin/env bash
# kernelwiki on one machine, without containers: PostgreSQL, the service, the
# scheduler and one GPU worker per local GPU for every target that GPU runs.
#
#   deploy/single-node.sh [--port 8000] [--state DIR] [--keep] [--workers-per-gpu N]
#
# It uses the PostgreSQL server already answering on $KW_PG_PORT (default
# 5432) of 127.0.0.1 when there is one, otherwise it creates a throw-away
# cluster (initdb) in the state folder with the `initdb`/`pg_ctl` found on
# PATH or in $KW_PG_BIN. Everything it starts is stopped on Ctrl+C (or
# SIGTERM); the state folder (logs, database, cache) is removed unless --keep
# or --state was given. A worker builds and runs one job at a time, and
# compiling is CPU work: on a node with many cores, --workers-per-gpu N (default
# 1) starts N workers that share each GPU. docs/deploy.md describes each process.
#
# Environment: KW (the kernelwiki command; default `kernelwiki`, else
# `python3 -m app.cli.main`), KW_PG_PORT, KW_PG_BIN, KW_PG_USER (the user that runs
# a PostgreSQL this script creates when it runs as root; default nobody), and
# every KERNELWIKI_* setting (KERNELWIKI_TARGETS chooses the queues).
set -euo pipefail

port=8000
state=""
keep=0
per_gpu=1
while [ $# -gt 0 ]; do
    case "$1" in
        --port) port="$2"; shift 2 ;;
        --state) state="$2"; keep=1; shift 2 ;;
        --keep) keep=1; shift ;;
        --workers-per-gpu) per_gpu="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "single-node.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

[[ "$per_gpu" =~ ^[1-9][0-9]*$ ]] || { echo "single-node.sh: --workers-per-gpu takes a positive number" >&2; exit 2; }

say() { printf 'single-node: %s\n' "$*"; }
die() { printf 'single-node: %s\n' "$*" >&2; exit 1; }

if [ -z "${KW:-}" ]; then
    if command -v kernelwiki >/dev/null 2>&1; then KW=kernelwiki; else KW="python3 -m app.cli.main"; fi
fi
read -r -a kw <<<"$KW"
"${kw[@]}" --help >/dev/null 2>&1 || die "cannot run '$KW': install kernelwiki with the pg extra (pip install '.[pg]') or set KW"

if [ -z "$state" ]; then state="$(mktemp -d /tmp/kernelwiki-node.XXXXXX)"; fi
mkdir -p "$state/logs"
state="$(cd "$state" && pwd)"
logs="$state/logs"

pids=()
pg_started=""
cleanup() {
    trap - INT TERM EXIT
    say "stopping ${#pids[@]} process(es)"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [ -n "$pg_started" ]; then
        as_pg "$pg_ctl" -D "$state/pgdata" -m fast stop >/dev/null 2>&1 || true
    fi
    if [ "$keep" = 0 ]; then rm -rf "$state"; else say "state kept in $state"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -- PostgreSQL -------------------------------------------------------------------
pg_port="${KW_PG_PORT:-5432}"
find_pg() {
    local name="$1"
    if [ -n "${KW_PG_BIN:-}" ] && [ -x "$KW_PG_BIN/$name" ]; then echo "$KW_PG_BIN/$name"; return; fi
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
    local d
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/$name" ] && { echo "$d/$name"; return; }; done
    return 1
}
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u "${KW_PG_USER:-nobody}" -- "$@"; else "$@"; fi
}
pg_up() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
EOF
}

if pg_up "$pg_port"; then
    say "using the PostgreSQL server on 127.0.0.1:$pg_port"
else
    initdb="$(find_pg initdb)" || die "no PostgreSQL on 127.0.0.1:$pg_port and no initdb found: install PostgreSQL or set KW_PG_BIN"
    pg_ctl="$(find_pg pg_ctl)" || die "initdb found but no pg_ctl next to it"
    say "creating a PostgreSQL cluster in $state/pgdata ($initdb)"
    mkdir -p "$state/pgdata"
    if [ "$(id -u)" = 0 ]; then chown -R "${KW_PG_USER:-nobody}" "$state/pgdata" "$logs"; chmod a+rx "$state"; fi
    as_pg "$initdb" -D "$state/pgdata" -A trust -U postgres >"$logs/initdb.log" 2>&1 || die "initdb failed: see $logs/initdb.log"
    as_pg "$pg_ctl" -D "$state/pgdata" -l "$logs/postgres.log" -w \
        -o "-p $pg_port -k $state/pgdata -c listen_addresses=127.0.0.1" start >/dev/null || die "PostgreSQL did not start: see $logs/postgres.log"
    pg_started=1
fi
pg_url="postgresql://postgres@127.0.0.1:$pg_port"
python3 - "$pg_url" <<'EOF' || die "cannot create the databases (is psycopg installed? does user postgres exist?)"
import sys
import psycopg
with psycopg.connect(f"{sys.argv[1]}/postgres", autocommit=True) as conn:
    have = {row[0] for row in conn.execute("select datname from pg_database")}
    for name in ("kernelwiki", "kernelwiki_queue"):
        if name not in have:
            conn.execute(f'create database "{name}"')
EOF

export KERNELWIKI_DB="${KERNELWIKI_DB:-postgresql+psycopg://postgres@127.0.0.1:$pg_port/kernelwiki}"
export KERNELWIKI_QUEUE_DATABASE_URL="${KERNELWIKI_QUEUE_DATABASE_URL:-$pg_url/kernelwiki_queue}"
export KERNELWIKI_SERVER_URL="http://127.0.0.1:$port"
export KERNELWIKI_WORKER_CACHE="${KERNELWIKI_WORKER_CACHE:-$state/cache}"
if [ -z "${KERNELWIKI_RUNNER_TOKEN:-}" ]; then
    KERNELWIKI_RUNNER_TOKEN="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
    export KERNELWIKI_RUNNER_TOKEN
fi

start() {  # start NAME COMMAND...: run it in the background, its output in logs/NAME.log
    local name="$1"; shift
    "$@" >"$logs/$name.log" 2>&1 &
    pids+=("$!")
    echo "$!" >"$state/$name.pid"
}

# -- the service ------------------------------------------------------------------
start service "${kw[@]}" serve --port "$port"
for _ in $(seq 600); do
    # health answers while the first index is built ("indexing"); the scheduler needs the whole index
    if python3 -c "import json,sys,urllib.request; sys.exit(json.load(urllib.request.urlopen('$KERNELWIKI_SERVER_URL/api/health', timeout=2)).get('status') != 'ok')" 2>/dev/null; then break; fi
    kill -0 "${pids[0]}" 2>/dev/null || die "the service exited: see $logs/service.log"
    sleep 0.5
done

# -- the scheduler ----------------------------------------------------------------
start scheduler "${kw[@]}" worker --scheduler

# -- GPU workers: one per GPU, for every target it runs ---------------------------
targets="$(python3 -c "from app.settings import Settings; print(' '.join(Settings().targets))" 2>/dev/null || echo "sm_90 sm_90a sm_100 sm_100a sm_103a")"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"; fi
workers=0
for ((gpu = 0; gpu < gpus; gpu++)); do
    args=()
    for t in $targets; do
        if CUDA_VISIBLE_DEVICES=$gpu "${kw[@]}" worker --target "$t" --check >/dev/null 2>&1; then args+=(--target "$t"); fi
    done
    if [ ${#args[@]} -eq 0 ]; then say "GPU $gpu runs none of: $targets"; continue; fi
    for ((n = 0; n < per_gpu; n++)); do
        CUDA_VISIBLE_DEVICES=$gpu start "worker-gpu$gpu-$n" "${kw[@]}" worker "${args[@]}"
        workers=$((workers + 1))
    done
    say "$per_gpu worker(s) on GPU $gpu: ${args[*]}"
done
[ "$workers" -gt 0 ] || say "no local GPU runs any target: jobs wait in their queues ('kernelwiki jobs')"

cat <<EOF
single-node: ready
  service     $KERNELWIKI_SERVER_URL   (evidence dashboard: $KERNELWIKI_SERVER_URL/evidence)
  queue       KERNELWIKI_QUEUE_DATABASE_URL=$KERNELWIKI_QUEUE_DATABASE_URL $KW jobs
  nightly now KERNELWIKI_QUEUE_DATABASE_URL=$KERNELWIKI_QUEUE_DATABASE_URL KERNELWIKI_DB=$KERNELWIKI_DB $KW jobs --enqueue
  logs        $logs
  pids        $state/*.pid
Ctrl+C stops everything.
EOF

# Stay in the foreground until interrupted, or until the service dies.
while kill -0 "${pids[0]}" 2>/dev/null; do sleep 1; done
die "the service exited: see $logs/service.log"
