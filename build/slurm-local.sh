#!/usr/bin/env bash
# A real Slurm (slurmctld + slurmd + munged) on localhost, for trying and
# testing sbatch scripts: one node (this machine, its CPUs), one partition,
# no accounting, every file in one directory.
#
#   build/slurm-local.sh run SCRIPT [SBATCH-ARGS...]
#       start Slurm in a fresh temp dir, sbatch --wait SCRIPT, stop Slurm;
#       exits with sbatch's status (an array's highest task exit code)
#   build/slurm-local.sh start        start in $SLURM_LOCAL_DIR and leave it up
#   build/slurm-local.sh submit SCRIPT [SBATCH-ARGS...]   sbatch --wait there
#   build/slurm-local.sh stop         stop what start started
#
# When Slurm or munge is missing it installs Debian's slurm-wlm and munge
# (root with apt-get only). Exit 77 means "Slurm cannot run here" (not
# root, no apt-get, the install failed, the daemons did not come up), so a
# test can skip on it; anything else is the job's own status.
#
# Environment: SLURM_LOCAL_DIR (start/submit/stop; default
# /tmp/skynet-slurm-local), SLURM_LOCAL_TIMEOUT (seconds sbatch --wait may
# take, default 900), SLURM_LOCAL_PORT (slurmctld's port, default 6817;
# slurmd takes the next), SLURM_LOCAL_KEEP=1 keeps run's temp dir.
# The job's tasks inherit this environment (sbatch --export=ALL), and their
# stdout/stderr go to DIR/log/slurm-%A_%a.out unless SBATCH-ARGS has -o.
set -euo pipefail

SKIP=77
say() { echo "slurm-local: $*" >&2; }
skip() { say "$*"; exit "$SKIP"; }

need_install() {
  local c
  for c in slurmctld slurmd sbatch sinfo scontrol munged; do
    command -v "$c" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$c" >/dev/null 2>&1 || return 0
  done
  return 1
}

install() {
  export PATH="$PATH:/usr/sbin:/sbin"
  need_install || return 0
  [ "$(id -u)" = 0 ] || skip "slurmctld/slurmd/munged are not installed and this is not root: apt-get install slurm-wlm munge"
  command -v apt-get >/dev/null 2>&1 || skip "slurmctld/slurmd/munged are not installed and there is no apt-get"
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  local pkgs=(slurm-wlm munge)
  if ! apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >"$1/apt.log" 2>&1; then
    # A stale package index is the usual cause: refresh once and retry.
    apt-get update -qq >>"$1/apt.log" 2>&1 || true
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$1/apt.log" 2>&1 ||
      { tail -5 "$1/apt.log" >&2; skip "apt-get install ${pkgs[*]} failed (log above)"; }
  fi
  need_install && skip "installed ${pkgs[*]} but slurmctld/slurmd/munged are still not on PATH"
  return 0
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start DIR: munged, slurmctld and slurmd with everything in DIR.
start() {
  local d=$1
  [ "$(id -u)" = 0 ] || skip "Slurm on localhost needs root here (SlurmUser=root, and slurmd runs jobs as their user)"
  mkdir -p "$d"
  chmod 755 "$d"
  install "$d"
  local port=${SLURM_LOCAL_PORT:-6817}
  local p
  for p in "$port" $((port + 1)); do
    port_busy "$p" && skip "port $p is in use (another slurmctld/slurmd?): set SLURM_LOCAL_PORT"
  done

  # munge: the packaged key (made if missing), our own socket, so a system
  # munged (or none) does not matter. munged runs as the munge user, and its
  # socket's directory must be world-executable or it refuses to start.
  local key=/etc/munge/munge.key
  if [ ! -s "$key" ]; then
    say "creating $key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then mungekey --create --keyfile="$key" --force; else
      dd if=/dev/urandom of="$key" bs=1 count=1024 status=none; fi
    chown munge:munge /etc/munge "$key" 2>/dev/null || true
    chmod 700 /etc/munge
    chmod 600 "$key"
  fi
  mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/log"
  local mu=()
  if id munge >/dev/null 2>&1; then
    chown munge:munge "$d/munge"
    mu=(runuser -u munge --)
  fi
  chmod 755 "$d/munge"
  "${mu[@]}" munged --key-file="$key" --socket="$d/munge/socket" --pid-file="$d/munge/munged.pid" \
    --log-file="$d/munge/munged.log" --seed-file="$d/munge/munged.seed" ||
    { cat "$d/munge/munged.log" >&2 2>/dev/null; skip "munged did not start"; }
  munge -S "$d/munge/socket" -n </dev/null | unmunge -S "$d/munge/socket" >/dev/null ||
    skip "munge cannot encode and decode a credential"

  cat >"$d/slurm.conf" <<EOF
# Written by build/slurm-local.sh: one node, this machine.
ClusterName=skynet-local
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$d/slurm.conf"
  slurmctld -f "$SLURM_CONF" || { tail -20 "$d/log/slurmctld.log" >&2 2>/dev/null; skip "slurmctld did not start"; }
  # -N: the node is "localhost" whatever this machine's hostname is.
  slurmd -f "$SLURM_CONF" -N localhost || { tail -20 "$d/log/slurmd.log" >&2 2>/dev/null; skip "slurmd did not start"; }
  local i state=""
  for i in $(seq 1 60); do
    state=$(sinfo -h -N -n localhost -o %t 2>/dev/null || true)
    [ "$state" = idle ] && { say "up: SLURM_CONF=$SLURM_CONF (node localhost idle, $(nproc) CPUs)"; return 0; }
    sleep 0.5
  done
  tail -20 "$d/log/slurmctld.log" "$d/log/slurmd.log" >&2 2>/dev/null || true
  skip "the node did not become idle within 30s (sinfo says: ${state:-nothing})"
}

# stop DIR: cancel what still runs (this cluster's jobs are all ours: a
# slurmd shutting down leaves running steps alone), then the daemons by the
# pids they wrote, never by name.
stop() {
  local d=$1 f p i
  [ -n "${sbatch_pid:-}" ] && kill "$sbatch_pid" 2>/dev/null
  if [ -f "$d/slurm.conf" ]; then
    export SLURM_CONF="$d/slurm.conf"
    if [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
      scancel --user="$(id -un)" 2>/dev/null || true
      for i in $(seq 1 40); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
    fi
    scontrol shutdown >/dev/null 2>&1 || true
  fi
  for f in "$d/slurmctld.pid" "$d/slurmd.pid" "$d/munge/munged.pid"; do
    p=$(cat "$f" 2>/dev/null) || continue
    [ -n "$p" ] || continue
    case $f in */munged.pid) kill "$p" 2>/dev/null || true ;; esac
    for i in $(seq 1 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill "$p" 2>/dev/null && sleep 1
    kill -9 "$p" 2>/dev/null || true
  done
}

# submit DIR SCRIPT ARGS...: sbatch --wait, its status, the failed tasks' logs.
submit() {
  local d=$1
  shift
  [ $# -ge 1 ] || { say "submit: name the sbatch script"; exit 2; }
  export SLURM_CONF="$d/slurm.conf"
  [ -f "$SLURM_CONF" ] || skip "no Slurm started in $d (build/slurm-local.sh start)"
  local script=$1
  shift
  local out=(--output="$d/log/slurm-%A_%a.out")
  local a
  for a in "$@"; do case $a in -o | -o* | --output | --output=*) out=() ;; esac; done
  local rc=0
  # In the background, so a signal to this script runs its trap at once
  # (bash runs traps only when a foreground child has exited).
  timeout "${SLURM_LOCAL_TIMEOUT:-900}" sbatch --wait "${out[@]}" "$@" "$script" &
  sbatch_pid=$!
  wait "$sbatch_pid" || rc=$?
  sbatch_pid=
  if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] && say "sbatch --wait did not return within ${SLURM_LOCAL_TIMEOUT:-900}s"
    for a in "$d"/log/slurm-*.out; do
      [ -s "$a" ] && { echo "--- $a" >&2; tail -20 "$a" >&2; }
    done
    say "sbatch --wait exited $rc"
  fi
  return "$rc"
}

cmd=${1:-}
shift || true
case $cmd in
  run)
    dir=$(mktemp -d /tmp/skynet-slurm.XXXXXX)
    cleanup() {
      stop "$dir"
      if [ "${SLURM_LOCAL_KEEP:-}" = 1 ]; then say "kept $dir"; else rm -rf "$dir"; fi
    }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start "$dir"
    submit "$dir" "$@"
    ;;
  start)
    dir=${SLURM_LOCAL_DIR:-/tmp/skynet-slurm-local}
    [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null &&
      { say "already running in $dir"; echo "export SLURM_CONF=$dir/slurm.conf"; exit 0; }
    rm -rf "$dir"
    trap 'rc=$?; [ $rc = 0 ] || stop "$dir"' EXIT
    start "$dir"
    echo "export SLURM_CONF=$dir/slurm.conf"
    ;;
  submit) submit "${SLURM_LOCAL_DIR:-/tmp/skynet-slurm-local}" "$@" ;;
  stop) stop "${SLURM_LOCAL_DIR:-/tmp/skynet-slurm-local}" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
