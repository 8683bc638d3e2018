#!/usr/bin/env bash
# Start a one-node SLURM cluster (with working slurmdbd accounting) on this
# machine, for the `pytest -m slurm` tests.
#
#   sudo bash tests/slurm/start-local-slurm.sh          # idempotent
#   sudo bash tests/slurm/start-local-slurm.sh --stop   # stop what it started
#
# Debian/Ubuntu only, must run as root, needs no systemd: it installs
#   munge slurmctld slurmd slurm-client slurmdbd mariadb-server
# writes /etc/slurm/{slurm,slurmdbd}.conf and starts munged, mariadbd,
# slurmdbd, slurmctld and slurmd itself, then waits until `srun hostname`
# works.  Running it again when everything is up only checks and returns.
#
# Why accounting (slurmdbd + MariaDB) and not accounting_storage/none: the
# snakemake SLURM executor plugin polls `sacct` whenever the binary is on PATH;
# without a working slurmdbd, sacct never reports the finished jobs and the
# workflow waits forever after its jobs have completed.
#
# GPUs: this node has no GRES.  Jobs that ask for --gpus/--gres are rejected
# by sbatch, so the tests submit the workflow with the real profiles/slurm
# and GRPO_SLURM_GPUS=0 (no GPU requests) plus GRPO_SLURM_MAX_CPUS and
# GRPO_SLURM_MAX_MEM_MB capped to this node; see LOCAL_ENV in tests/cluster/test_slurm.py.
#
# Environment knobs (defaults in brackets):
#   SLURM_CLUSTER_NAME [localcluster]  SLURM_PARTITION [debug]
#   SLURM_TEST_ACCOUNT [grpo-test]     (an account that root and $SUDO_USER
#                                       may use, so slurm_account can be tested)
#   SLURM_START_TIMEOUT [180]          seconds to wait for `srun hostname`
set -euo pipefail

CLUSTER="${SLURM_CLUSTER_NAME:-localcluster}"
PARTITION="${SLURM_PARTITION:-debug}"
ACCOUNT="${SLURM_TEST_ACCOUNT:-grpo-test}"
TIMEOUT="${SLURM_START_TIMEOUT:-180}"
DB_PASS="slurmdbd-local-only"          # local MariaDB user, socket-only test db
MYSQL_SOCK=/run/mysqld/mysqld.sock
STATE=/var/lib/grpo-local-slurm        # marker files + pid bookkeeping
T0=$(date +%s)

log() { printf '[start-local-slurm %3ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (try: sudo bash $0)"

# ---------------------------------------------------------------- stop mode
pid_alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }
stop_pidfile() {  # stop the daemon whose pid is in $1 (only ours, by pid)
  local f=$1 i
  if pid_alive "$f"; then
    kill "$(cat "$f")" 2>/dev/null || true
    for i in $(seq 50); do pid_alive "$f" || break; sleep 0.2; done
  fi
  rm -f "$f"
}
if [[ "${1:-}" == "--stop" ]]; then
  stop_pidfile /run/slurm/slurmd.pid
  stop_pidfile /run/slurm/slurmctld.pid
  stop_pidfile /run/slurm/slurmdbd.pid
  stop_pidfile /run/mysqld/mysqld.pid
  stop_pidfile /run/munge/munged.pid
  log "stopped"
  exit 0
fi

# ---------------------------------------------------------------- packages
PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------- layout
HOST=$(hostname -s)
mkdir -p "$STATE" /etc/slurm /var/log/slurm /var/spool/slurmctld /var/spool/slurmd \
         /run/slurm /run/munge /var/log/munge /var/lib/munge /run/mysqld /var/log/mysql
chown slurm:slurm /var/log/slurm /var/spool/slurmctld /run/slurm
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
chown mysql:mysql /run/mysqld /var/log/mysql

# Node line from the hardware, RealMemory ~90% of what slurmd sees.
node_line=$(slurmd -C | head -n1)
real_mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
[[ -n $real_mem ]] || die "could not parse 'slurmd -C': $node_line"
node_line=$(sed "s/RealMemory=[0-9]*/RealMemory=$(( real_mem * 9 / 10 ))/" <<<"$node_line")

write_if_changed() {  # write stdin to $1 (mode $2, owner $3); return 0 if changed
  local dst=$1 mode=$2 owner=$3 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f $dst ]] && cmp -s "$tmp" "$dst"; then rm -f "$tmp"; return 1; fi
  install -m "$mode" -o "${owner%:*}" -g "${owner#*:}" "$tmp" "$dst"
  rm -f "$tmp"
  return 0
}

conf_changed=0
write_if_changed /etc/slurm/slurm.conf 0644 root:root <<EOF && conf_changed=1 || true
# Written by tests/slurm/start-local-slurm.sh -- one-node test cluster.
ClusterName=$CLUSTER
SlurmctldHost=$HOST
AuthType=auth/munge
CryptoType=crypto/munge
SlurmUser=slurm
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
# accounting: sacct must work (the snakemake plugin polls it)
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
# keep sbatch --comment (the plugin writes rule_<name>_wildcards_<...> there) in sacct
AccountingStoreFlags=job_comment
JobAcctGatherFrequency=10
JobCompType=jobcomp/none
$node_line State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

write_if_changed /etc/slurm/slurmdbd.conf 0600 slurm:slurm <<EOF && conf_changed=1 || true
# Written by tests/slurm/start-local-slurm.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=/run/slurm/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DB_PASS
EOF
# a cgroup.conf is not needed: proctrack/linuxproc + task/affinity

# ---------------------------------------------------------------- fast path: configs unchanged, all up
cluster_works() {
  command -v srun >/dev/null 2>&1 &&
    pid_alive /run/slurm/slurmctld.pid && pid_alive /run/slurm/slurmd.pid &&
    timeout 20 srun --quiet -N1 -n1 -t 1 hostname >/dev/null 2>&1 &&
    timeout 10 sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"
}
if ((conf_changed == 0)) && [[ -f $STATE/configured ]] && cluster_works; then
  log "cluster '$CLUSTER' already up (srun + sacctmgr work); nothing to do"
  exit 0
fi

# ---------------------------------------------------------------- munge
if ! { pid_alive /run/munge/munged.pid && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }; then
  [[ -s /etc/munge/munge.key ]] || runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2*
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
  munge -n | unmunge >/dev/null || die "munge does not work"
fi

# ---------------------------------------------------------------- mariadb
db_ping() { mariadb-admin --socket="$MYSQL_SOCK" ping >/dev/null 2>&1; }
if ! db_ping; then
  if [[ ! -d /var/lib/mysql/mysql ]]; then
    log "initialising MariaDB data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  fi
  log "starting mariadbd"
  setsid -f runuser -u mysql -- /usr/sbin/mariadbd \
      --datadir=/var/lib/mysql --socket="$MYSQL_SOCK" --pid-file=/run/mysqld/mysqld.pid \
      --bind-address=127.0.0.1 --log-error=/var/log/mysql/error.log \
      --innodb-lock-wait-timeout=900 --innodb-buffer-pool-size=128M \
      </dev/null >/dev/null 2>&1
  for _ in $(seq 150); do db_ping && break; sleep 0.2; done
  db_ping || die "mariadbd did not come up; see /var/log/mysql/error.log"
fi
mariadb --socket="$MYSQL_SOCK" -u root <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF

# ---------------------------------------------------------------- slurmdbd
dbd_ok() { timeout 10 sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; }
if ((conf_changed)); then
  # configs changed: restart the slurm daemons we may have started earlier
  stop_pidfile /run/slurm/slurmd.pid
  stop_pidfile /run/slurm/slurmctld.pid
  stop_pidfile /run/slurm/slurmdbd.pid
fi
if ! { pid_alive /run/slurm/slurmdbd.pid && dbd_ok; }; then
  stop_pidfile /run/slurm/slurmdbd.pid
  log "starting slurmdbd"
  /usr/sbin/slurmdbd
  for _ in $(seq 150); do dbd_ok && break; sleep 0.2; done
  dbd_ok || die "slurmdbd did not come up; see /var/log/slurm/slurmdbd.log"
fi
if ! sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
  log "registering cluster $CLUSTER"
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
if ! sacctmgr -n -P show account format=account | grep -qx "$ACCOUNT"; then
  sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="grpo-budget tests" >/dev/null
fi
for u in root ${SUDO_USER:-}; do
  if ! sacctmgr -n -P show assoc where user="$u" account="$ACCOUNT" format=user | grep -qx "$u"; then
    sacctmgr -i add user "$u" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
  fi
done

# ---------------------------------------------------------------- slurmctld / slurmd
if ! { pid_alive /run/slurm/slurmctld.pid && timeout 10 scontrol ping 2>/dev/null | grep -q UP; }; then
  stop_pidfile /run/slurm/slurmctld.pid
  log "starting slurmctld"
  /usr/sbin/slurmctld
fi
for _ in $(seq 100); do timeout 5 scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
if ! pid_alive /run/slurm/slurmd.pid; then
  log "starting slurmd"
  /usr/sbin/slurmd
fi

# ---------------------------------------------------------------- wait
log "waiting for 'srun hostname' (up to ${TIMEOUT}s)"
deadline=$(( $(date +%s) + TIMEOUT ))
until timeout 20 srun --quiet -N1 -n1 -t 1 hostname >/dev/null 2>&1; do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
  case "$state" in
    *drain*|*down*|*fail*)  # e.g. after a restart with changed resources
      scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  if (( $(date +%s) > deadline )); then
    sinfo -N -l >&2 || true
    tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    die "cluster did not accept jobs within ${TIMEOUT}s"
  fi
  sleep 1
done
touch "$STATE/configured"
log "cluster '$CLUSTER' up: partition '$PARTITION', account '$ACCOUNT', node: $node_line"
