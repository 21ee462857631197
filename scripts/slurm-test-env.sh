#!/usr/bin/env bash
# A one-machine Slurm cluster and a WebDAV cache for forge's tests.
#
#   scripts/slurm-test-env.sh start DIR   installs what is missing (root only),
#                                         starts munged, slurmctld, slurmd, nginx
#   scripts/slurm-test-env.sh stop DIR    stops every daemon it started in DIR
#
# Everything lives under DIR: configuration, state, logs, sockets, pid files,
# the cache's document root. No systemd, nothing under /etc is changed (Debian's
# packages may start their own services on install; they are stopped here and
# left stopped). After `start`, DIR/env holds the variables clients need
# (SLURM_CONF, FORGE_TEST_CACHE_URL); `start` prints "ready" last and exits 0,
# or exits nonzero with the reason on stderr (and stops what it started).
#
# The node: the local host, 2 CPUs, Gres=gpu:2 backed by two harmless character
# devices (copies of /dev/null made with mknod), so Slurm hands each GPU job a
# distinct CUDA_VISIBLE_DEVICES without a GPU. proctrack/linuxproc and
# task/none: no cgroups needed. No accounting (no slurmdbd; sacct is absent).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop_all() {
  # Jobs first (slurmd kills their processes), then the daemons.
  if [ -f "$dir/etc/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    SLURM_CONF="$dir/etc/slurm.conf" timeout 5 scancel --user=root >/dev/null 2>&1 || true
  fi
  stop_pidfile "$dir/run/slurmd.pid"
  stop_pidfile "$dir/run/slurmctld.pid"
  stop_pidfile "$dir/run/munged.pid"
  if [ -f "$dir/run/nginx.pid" ]; then
    nginx -c "$dir/etc/nginx.conf" -p "$dir" -s stop >/dev/null 2>&1 || true
    stop_pidfile "$dir/run/nginx.pid"
  fi
}

if [ "$cmd" = stop ]; then
  stop_all
  echo "stopped"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

fail() { echo "slurm-test-env: $*" >&2; stop_all; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root (slurmd runs jobs as their user and must be root)"

need=()
for b in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge nginx:nginx-light; do
  command -v "${b%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${b%%:*}" ] || need+=("${b##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Do not let the packages start their services: we run our own copies.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } \
    >"$dir/apt.log" 2>&1 || fail "apt-get install ${need[*]} failed (see $dir/apt.log)"
  rm -f /usr/sbin/policy-rc.d
  trap - EXIT
fi
export PATH=/usr/sbin:/usr/bin:$PATH

stop_all
mkdir -p "$dir"/{etc,run,log,spool/ctld,spool/d,dev,dav,tmp}
host=$(hostname -s)

# munge: our own key and socket.
dd if=/dev/urandom of="$dir/etc/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/etc/munge.key"
munged --force --key-file="$dir/etc/munge.key" --socket="$dir/run/munge.sock" \
  --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/run/munge.seed" >/dev/null 2>&1 || fail "munged did not start"

# Two fake GPUs: character devices with /dev/null's numbers.
for i in 0 1; do
  [ -c "$dir/dev/gpu$i" ] || mknod "$dir/dev/gpu$i" c 1 3 || fail "mknod failed"
done

cpus=2
cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=forgetest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.sock
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=600
KillWait=2
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=10
NodeName=$host CPUs=$cpus RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
cat >"$dir/etc/gres.conf" <<EOF
NodeName=$host Name=gpu File=$dir/dev/gpu[0-1]
EOF
export SLURM_CONF="$dir/etc/slurm.conf"

slurmctld -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 || fail "slurmctld did not start (see $dir/log/slurmctld.log)"
slurmd -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 || fail "slurmd did not start (see $dir/log/slurmd.log)"

ok=0
for _ in $(seq 100); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
  if [ "$state" = idle ]; then ok=1; break; fi
  sleep 0.2
done
[ $ok = 1 ] || fail "the node did not become idle (state '${state:-none}'; see $dir/log/)"

# nginx with WebDAV PUT on 127.0.0.1.
port=${FORGE_TEST_CACHE_PORT:-18080}
cat >"$dir/etc/nginx.conf" <<EOF
daemon on;
user root root;
pid $dir/run/nginx.pid;
error_log $dir/log/nginx-error.log;
worker_processes 1;
events { worker_connections 64; }
http {
  access_log $dir/log/nginx-access.log;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  client_max_body_size 0;
  server {
    listen 127.0.0.1:$port;
    root $dir/dav;
    location / {
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
    }
  }
}
EOF
nginx -c "$dir/etc/nginx.conf" -p "$dir" >"$dir/log/nginx.out" 2>&1 || fail "nginx did not start (see $dir/log/nginx.out)"

cat >"$dir/env" <<EOF
export SLURM_CONF=$SLURM_CONF
export FORGE_TEST_CACHE_URL=http://127.0.0.1:$port/forge
export FORGE_TEST_DAV_ROOT=$dir/dav
EOF
echo ready
