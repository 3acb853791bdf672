#!/usr/bin/env bash
# A Ray cluster on this machine for `undobench run --executor ray`: a head with no CPUs
# (the driver attaches to it; it runs no actor) and WORKERS worker nodes with CPUS CPUs
# each, every one its own raylet, every listener on 127.0.0.1 (docs/sweeps.md, "A Ray
# cluster"). Each node runs in its own session, so `stop` kills exactly what `start`
# started, not every Ray on the machine (`ray stop` would).
#
#   scripts/ray_local_cluster.sh start [WORKERS=2] [CPUS=1]   # prints the address
#   scripts/ray_local_cluster.sh status
#   scripts/ray_local_cluster.sh kill N                        # SIGKILL worker node N's raylet
#   scripts/ray_local_cluster.sh add N [CPUS=1]                # start one more worker node, N
#   scripts/ray_local_cluster.sh stop
#
# RAY_DIR (default /tmp/undobench-ray): Ray's temp dir (logs, sockets) and the nodes'
# process groups. RAY_PORT (default 6380): the head's port; node i (0: the head) takes the
# 50 ports from RAY_PORT+50*i, so keep them clear of other services and below the
# ephemeral range. Token authentication: the driver needs RAY_AUTH_MODE=token too.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
dir="${RAY_DIR:-/tmp/undobench-ray}"
port="${RAY_PORT:-6380}"
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
# Ray's CLI with its multi-node guard lifted, so 127.0.0.1 stays 127.0.0.1 (ray_actors.py).
cli=("$py" -c 'from undobench_gym.harness.executors.ray_actors import loopback_ray_cli; loopback_ray_cli()')

node() { # node N [ray start flags...]: start it in a session of its own, record its group
  local n=$1 b=$((port + 50 * $1))
  shift
  setsid -w bash -c 'echo "$$" >"$0/node$1.pgid"; shift; exec "$@"' "$dir" "$n" \
    "${cli[@]}" start "$@" --node-ip-address=127.0.0.1 --temp-dir="$dir" \
    --disable-usage-stats --object-store-memory=$((100 * 1024 * 1024)) \
    --node-manager-port=$((b + 1)) --object-manager-port=$((b + 2)) \
    --dashboard-agent-listen-port=$((b + 3)) --dashboard-agent-grpc-port=$((b + 4)) \
    --metrics-export-port=$((b + 5)) --runtime-env-agent-port=$((b + 6)) \
    --min-worker-port=$((b + 10)) --max-worker-port=$((b + 49)) \
    >"$dir/node$n.log" 2>&1 || {
    tail -20 "$dir/node$n.log" >&2
    echo "node $n did not start: $dir/node$n.log" >&2
    exit 1
  }
}

group_pids() { # the processes of process group $1
  ps -eo pid=,pgid= | awk -v g="$1" '$2 == g { print $1 }'
}

case "${1:-}" in
start)
  workers="${2:-2}" cpus="${3:-1}"
  mkdir -p "$dir"
  if compgen -G "$dir/node*.pgid" >/dev/null; then
    echo "a cluster is recorded in $dir: run '$0 stop' first" >&2
    exit 1
  fi
  # `ray start` with RAY_AUTH_MODE=token needs a token: ~/.ray/auth_token (or
  # RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH), made here if there is none.
  "${cli[@]}" get-auth-token --generate >/dev/null
  node 0 --head --port="$port" --num-cpus=0 --include-dashboard=false \
    --ray-client-server-port=$((port + 7))
  for n in $(seq 1 "$workers"); do
    node "$n" --address="127.0.0.1:$port" --num-cpus="$cpus"
  done
  echo "127.0.0.1:$port: head + $workers worker node(s) x $cpus CPU(s); logs in $dir"
  echo "run: RAY_AUTH_MODE=token undobench run ... --executor ray --ray-address 127.0.0.1:$port --workers $((workers * cpus))"
  ;;
status)
  "${cli[@]}" status --address="127.0.0.1:$port"
  ;;
add)
  node "${2:?which worker node}" --address="127.0.0.1:$port" --num-cpus="${3:-1}"
  echo "worker node $2 joined 127.0.0.1:$port"
  ;;
kill)
  pgid="$(cat "$dir/node${2:?which worker node}.pgid")"
  for pid in $(group_pids "$pgid"); do
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = raylet ]; then kill -KILL "$pid" && echo "killed raylet $pid"; fi
  done
  ;;
stop)
  # Worker nodes first, the head last; TERM, then KILL what is left of each group.
  for f in $(ls -r "$dir"/node*.pgid 2>/dev/null); do
    kill -TERM -- "-$(cat "$f")" 2>/dev/null || true
  done
  sleep 2
  for f in $(ls -r "$dir"/node*.pgid 2>/dev/null); do
    kill -KILL -- "-$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  ;;
*)
  sed -n '2,17p' "$0" >&2
  exit 2
  ;;
esac
