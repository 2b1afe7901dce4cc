#!/usr/bin/env bash
# Stand up a single-node Slurm cluster on this Debian/Ubuntu machine, as root, without systemd:
# Debian's slurm-wlm and munge, a munge key, a slurm.conf describing this host's real CPUs and
# memory (from `slurmd -C`), then munged, slurmctld and slurmd started as plain daemons. Returns once
# `sinfo` shows the node idle, so the next command can `sbatch`. tests/staff/test_grade_slurm.py
# grades through it (`cs336 grade --executor slurm`); .ci/run calls this script before that test.
#
#   sudo .ci/slurm-up.sh          # idempotent: a cluster already up (node idle) is left as it is
#   sudo .ci/slurm-up.sh --down   # stop slurmctld and slurmd (munged is left running)
#
# No accounting database (slurmdbd) is configured, so `sacct` reports "accounting storage is
# disabled"; the grader reads job states from `squeue` instead (cs336_staff/grade/batch.py).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by cs336 .ci/slurm-up.sh"
STATE=/var/lib/cs336-slurm        # slurmctld state, slurmd spool, pid files and logs
UP_TIMEOUT_S=60                   # measured here: the node is idle 1-2 s after slurmd starts

die() { echo "slurm-up: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (sudo $0): it installs packages and starts daemons"

down() {  # only the daemons this script started (their pid files are in $STATE); munged stays
    for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid"; do
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$pidfile"
    done
}
if [ "${1:-}" = "--down" ]; then down; exit 0; fi
[ $# -eq 0 ] || die "unknown argument $1 (use no argument, or --down)"

t0=$(date +%s)
if command -v sinfo >/dev/null && sinfo -h -N -o %T 2>/dev/null | grep -qx idle; then
    echo "slurm-up: already up: $(sinfo -h -N -o '%N %T %c CPUs %m MB')"
    exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# munge: one key shared by the controller and the node (both here). Debian's postinst usually
# made one; make it if not.
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then mungekey --create --force; else create-munge-key -f; fi
fi
chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null || die "munged did not start (see /var/log/munge/munged.log)"
fi

# slurm.conf for this host: `slurmd -C` prints its NodeName line (CPUs, sockets, cores, memory).
if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script; move it away or start that cluster yourself"
fi
HOST=$(hostname -s)
NODE=$(slurmd -C | head -n 1)
case "$NODE" in NodeName=*) ;; *) die "slurmd -C printed no NodeName line: $NODE" ;; esac
install -d -m 755 "$STATE" "$STATE/ctld" "$STATE/d" /etc/slurm
cat >"$CONF" <<EOF
$MARK on $(date -u +%FT%TZ); rerun it to rewrite.
ClusterName=cs336
SlurmctldHost=$HOST
AuthType=auth/munge
SlurmUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
# No cgroups without systemd here: track a job's processes by parentage (children that start their
# own session, as the grading worker does, are still found and killed at the time limit).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# A job past its time limit gets SIGTERM, then SIGKILL KillWait seconds later.
KillWait=5
# Finished jobs stay visible to squeue (state TIMEOUT, FAILED, ...) this long: the grader reads them.
MinJobAge=600
$NODE State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

down  # daemons of an earlier run of this script, if any, read the old file
slurmctld
slurmd
for _ in $(seq $((UP_TIMEOUT_S * 2))); do
    if sinfo -h -N -o %T 2>/dev/null | grep -qx idle; then
        echo "slurm-up: up in $(($(date +%s) - t0)) s: $(sinfo -h -N -o '%N %T %c CPUs %m MB')"
        exit 0
    fi
    sleep 0.5
done
sinfo -N -l >&2 || true
tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
die "the node is not idle after ${UP_TIMEOUT_S} s (logs above, in $STATE/)"
