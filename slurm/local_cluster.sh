#!/usr/bin/env bash
# A Slurm cluster on this one machine, for development and the tests marked `slurm`:
# Debian's own Slurm (slurm-wlm) and munge, a `cpu` partition of two virtual nodes n1 and n2
# (slurmd on this host, on their own ports; each offers this machine's cores and memory, which
# they share), slurmdbd on MariaDB so that `sacct` answers as on a real cluster. A second
# partition `side` of two more such nodes, n3 and n4, runs the tests that fault no node beside
# those that fault n1 or n2 (scripts/run_tests.sh: two slurm test processes at once).
#
#   slurm/local_cluster.sh start        install what is missing, write the configs, start (idempotent)
#   slurm/local_cluster.sh stop         stop every daemon it started (idempotent)
#   slurm/local_cluster.sh status       one line per daemon, then sinfo
#   slurm/local_cluster.sh fail-node N  a node lost: kill N's slurmd and the jobs running on it
#                                       (as a power cut would); `start` brings the node back
#
# Environment: LOCAL_SLURM_DB=0 skips MariaDB + slurmdbd (no accounting: sacct fails, the
# launcher then reads job states from its own files). Root and Debian only (apt-get, daemons).
# Written configs carry MARK; a slurm.conf without it (a real site's) is never overwritten.
set -euo pipefail

MARK="# written by loosespec_bench slurm/local_cluster.sh"
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
CGROUP_CONF=$CONF_DIR/cgroup.conf
STATE=/var/lib/slurm
LOGS=/var/log/slurm
CLUSTER=loosespec
# The partitions' nodes: cpu (the default; the node faults of tests/test_slurm.py strike these,
# and partition urgent preempts on them) and side (the other slurm tests' jobs, untouched by them).
CPU_NODES=(n1 n2)
SIDE_NODES=(n3 n4)
NODES=("${CPU_NODES[@]}" "${SIDE_NODES[@]}")
NODE_PORTS=(6821 6822 6823 6824)
DB=${LOCAL_SLURM_DB:-1}
PACKAGES=(slurmctld slurmd slurm-client munge)
DB_PACKAGES=(slurmdbd mariadb-server)

die() { echo "error: $*" >&2; exit 2; }
say() { echo "[slurm-local] $*"; }

preflight() {
    [ "$(id -u)" -eq 0 ] || die "slurm/local_cluster.sh installs packages and starts daemons: run it as root (sudo make slurm-local)"
    [ -r /etc/debian_version ] && command -v apt-get >/dev/null \
        || die "slurm/local_cluster.sh needs Debian (apt-get and Debian's slurm-wlm packages); elsewhere use your site's Slurm (slurm/README.md)"
}

install_packages() {
    local want=("${PACKAGES[@]}") missing=()
    [ "$DB" = 1 ] && want+=("${DB_PACKAGES[@]}")
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    say "installing ${missing[*]}"
    # policy-rc.d: the packages' own init scripts must not start daemons with Debian's configs.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/tmp/slurm-local-apt.log 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >>/tmp/slurm-local-apt.log 2>&1; } \
        || die "apt-get install ${missing[*]} failed (see /tmp/slurm-local-apt.log)"
}

# Write $2 to $1 only if it differs; returns 0 when the file changed.
write_if_changed() {
    local path=$1 body=$2
    if [ -f "$path" ] && [ "$(cat "$path")" = "$body" ]; then return 1; fi
    if [ -f "$path" ] && ! grep -qF "$MARK" "$path"; then
        die "$path exists and was not written by this script (a site's Slurm?); move it away to use the local cluster"
    fi
    printf '%s\n' "$body" >"$path"
    return 0
}

write_configs() {
    mkdir -p "$CONF_DIR" "$LOGS" "$STATE/slurmctld" /run/munge
    chown slurm:slurm "$LOGS" "$STATE" "$STATE/slurmctld"
    # Weight: an idle cluster places a job on n1 first (the tests' lost node; n3 in side). This
    # machine as slurmd sees it (CPUs, sockets, cores, threads, RealMemory in MB), minus its name:
    # every virtual node offers it. 5% of the memory stays for the OS and the daemons.
    local hw mem
    hw=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//')
    mem=$(( $(slurmd -C | head -1 | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p') * 95 / 100 ))
    local host nodes="" i
    host=$(hostname -s)
    for i in "${!NODES[@]}"; do
        nodes+="NodeName=${NODES[$i]} NodeHostname=$host NodeAddr=127.0.0.1 Port=${NODE_PORTS[$i]} $hw RealMemory=$mem Weight=$((i + 1)) State=UNKNOWN"$'\n'
    done
    local acct="AccountingStorageType=accounting_storage/none"
    [ "$DB" = 1 ] && acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost"
    # Memory: --mem (hydra.launcher.mem_gb) is enforced only by task/cgroup, which needs slurmd to
    # make memory cgroups. Slurm 22.05 does that on cgroup v1 (a tmpfs at /sys/fs/cgroup with a
    # writable memory controller: probed by making and removing one); on cgroup v2 it needs
    # systemd's delegation, which this script does not set up. Without it: task/none, a job may
    # use more memory than it asked for, and the out-of-memory test skips, saying so.
    local task="TaskPlugin=task/none" cgroup_conf=""
    if cgroup_v1_memory; then
        task="TaskPlugin=task/cgroup"
        # AllowedRAMSpace=100: the limit is exactly --mem; no swap on the test machines, so RAM alone.
        cgroup_conf="$MARK
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
AllowedRAMSpace=100
ConstrainSwapSpace=no
ConstrainCores=no
ConstrainDevices=no"
    fi
    CONF_CHANGED=0
    if [ -n "$cgroup_conf" ]; then
        write_if_changed "$CGROUP_CONF" "$cgroup_conf" && CONF_CHANGED=1
        chmod 644 "$CGROUP_CONF"
    elif [ -f "$CGROUP_CONF" ] && grep -qF "$MARK" "$CGROUP_CONF"; then
        rm -f "$CGROUP_CONF"
    fi
    write_if_changed "$CONF" "$MARK
# A local cluster for development and tests; see slurm/README.md.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
# A requeued job waits cred_expire + 1 s before it may start again (Slurm's default is 120 s).
# It must be longer than the old step's teardown: a node marked DOWN while its slurmd lives
# (an admin, a health check) is back in service at once (ReturnToService=2), and the job, requeued,
# may be placed on it again; if its old step still runs there, slurmd refuses a second copy
# (Job N already running), slurmctld drains the node and holds the job (launch failed requeued
# held: nothing releases it). That step ignores SIGTERM (submitit) and dies at KillWait's SIGKILL,
# measured 7.4 s after the cancel with KillWait=5 (issue 49): 21 s leaves a wide margin on a loaded machine.
AuthInfo=cred_expire=20
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd-%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
ProctrackType=proctrack/linuxproc
$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
# Short timeouts so that the tests see a lost node, a kill and a requeue within seconds.
SlurmdTimeout=10
SlurmctldTimeout=30
# KillWait: keep it well below cred_expire (above) minus the step's ~2.4 s teardown.
KillWait=5
MinJobAge=600
InactiveLimit=0
ReturnToService=2
JobRequeue=1
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
JobAcctGatherType=jobacct_gather/none
$acct
JobCompType=jobcomp/none
# Preemption as sites run it: a job of partition urgent (higher PriorityTier, same nodes) requeues
# the cpu jobs it needs room from (the tests' preemption fault).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
${nodes}PartitionName=cpu Nodes=$(IFS=,; echo "${CPU_NODES[*]}") Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=$(IFS=,; echo "${CPU_NODES[*]}") Default=NO MaxTime=INFINITE State=UP PriorityTier=2
PartitionName=side Nodes=$(IFS=,; echo "${SIDE_NODES[*]}") Default=NO MaxTime=INFINITE State=UP PriorityTier=1" && CONF_CHANGED=1
    # The SlurmUser, not root, runs slurmctld: its config must be readable by it.
    chmod 644 "$CONF"
}

# True where slurmd can make memory cgroups the v1 way (see write_configs).
cgroup_v1_memory() {
    local probe="/sys/fs/cgroup/memory/loosespec-probe.$$"
    [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] || return 1
    [ -f /sys/fs/cgroup/memory/memory.oom_control ] || return 1
    compgen -G "/usr/lib/*/slurm-wlm/cgroup_v1.so" >/dev/null || return 1
    mkdir "$probe" 2>/dev/null && rmdir "$probe"
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
    if running /run/munge/munged.pid; then return; fi
    chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged
    say "munged started"
}

start_db() {
    [ "$DB" = 1 ] || return 0
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    if ! running /run/mysqld/mysqld.pid; then
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null
        setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --pid-file=/run/mysqld/mysqld.pid \
            --socket=/run/mysqld/mysqld.sock >>"$LOGS/mariadb.log" 2>&1 </dev/null &
        for _ in $(seq 60); do [ -S /run/mysqld/mysqld.sock ] && mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
        mariadb -e 'select 1' >/dev/null 2>&1 || die "MariaDB did not start (see $LOGS/mariadb.log); LOCAL_SLURM_DB=0 runs without accounting"
        say "mariadb started"
    fi
    # The accounting database's password: made once, kept in slurmdbd.conf (root/slurm only).
    local pass
    pass=$(sed -n 's/^StoragePass=//p' "$DBD_CONF" 2>/dev/null || true)
    [ -n "$pass" ] || pass=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
        ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
    write_if_changed "$DBD_CONF" "$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=/run/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db" || true
    chown slurm:slurm "$DBD_CONF" && chmod 600 "$DBD_CONF"
    if ! running /run/slurmdbd.pid; then
        slurmdbd
        for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
        say "slurmdbd started"
    fi
    sacctmgr -n list cluster format=cluster 2>/dev/null | grep -qw "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
}

start_slurm() {
    if running /run/slurmctld.pid && [ "$CONF_CHANGED" = 1 ]; then
        say "slurm.conf changed: restarting the daemons"
        stop_slurm
    fi
    if ! running /run/slurmctld.pid; then
        slurmctld
        for _ in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
        scontrol ping | grep -q UP || die "slurmctld did not start (see $LOGS/slurmctld.log)"
        say "slurmctld started"
    fi
    local n
    for n in "${NODES[@]}"; do
        if ! running "/run/slurmd-$n.pid"; then
            mkdir -p "$STATE/slurmd-$n"
            slurmd -N "$n"
            say "slurmd $n started"
        fi
    done
    # A node that was lost (fail-node) comes back DOWN; ReturnToService=2 revives it on
    # registration, resume makes sure. A node completing a job (comp) is in service: the tests on
    # partition side may be ending one while a fault test on cpu calls start.
    for _ in $(seq 60); do
        local states
        states=$(sinfo -h -N -o '%N %t' | sort -u)
        if ! grep -qvE ' (idle|mix|alloc|comp)$' <<<"$states"; then break; fi
        for node in $(awk '$2 ~ /^(down|drain|drng|unk)/ {print $1}' <<<"$states"); do
            scontrol update nodename="$node" state=resume 2>/dev/null || true
        done
        sleep 0.5
    done
    sinfo
}

stop_pid() {
    local name=$1 pidfile=$2 pid
    running "$pidfile" || return 0
    pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    rm -f "$pidfile"
    say "$name stopped"
}

stop_slurm() {
    local n
    for n in "${NODES[@]}"; do stop_pid "slurmd $n" "/run/slurmd-$n.pid"; done
    stop_pid slurmctld /run/slurmctld.pid
}

stop_all() {
    if running /run/slurmctld.pid; then scancel --full --quiet --user=root 2>/dev/null || true; scancel --quiet --state=PENDING 2>/dev/null || true; fi
    stop_slurm
    stop_pid slurmdbd /run/slurmdbd.pid
    stop_pid mariadb /run/mysqld/mysqld.pid
    stop_pid munged /run/munge/munged.pid
}

descendants() {
    local child
    for child in $(pgrep -P "$1" || true); do echo "$child"; descendants "$child"; done
}

# A lost node: its slurmd dies and so does every job step it ran (on a real node failure
# the processes die with the machine; here they would keep running beside the requeued job).
fail_node() {
    local node=$1 jobs pid
    [[ " ${NODES[*]} " == *" $node "* ]] || die "fail-node: no node $node (nodes: ${NODES[*]})"
    jobs=$(squeue -h -w "$node" -t R -o '%A' || true)
    stop_pid "slurmd $node" "/run/slurmd-$node.pid"
    for j in $jobs; do
        # slurmstepd names itself "slurmstepd: [<job id>.<step>]"; its descendants are the job.
        for pid in $(pgrep -f "^slurmstepd: \[$j\." || true); do
            # shellcheck disable=SC2046
            kill -9 "$pid" $(descendants "$pid") 2>/dev/null || true
        done
    done
    say "node $node lost (jobs killed: ${jobs:-none}); Slurm notices within SlurmdTimeout=10 s"
}

status() {
    local d
    for d in munged:/run/munge/munged.pid mariadb:/run/mysqld/mysqld.pid slurmdbd:/run/slurmdbd.pid \
             slurmctld:/run/slurmctld.pid "${NODES[@]/#/slurmd-}"; do
        [[ $d == *:* ]] || d="$d:/run/$d.pid"
        if running "${d#*:}"; then echo "${d%%:*}: running (pid $(cat "${d#*:}"))"; else echo "${d%%:*}: stopped"; fi
    done
    running /run/slurmctld.pid && sinfo -N -l || true
}

cmd=${1:-start}
case "$cmd" in
    start)
        preflight
        install_packages
        write_configs
        start_munge
        start_db
        start_slurm
        ;;
    stop) preflight; stop_all ;;
    status) status ;;
    fail-node) preflight; fail_node "${2:?fail-node needs a node name (n1 or n2)}" ;;
    *) die "unknown command $cmd; use start, stop, status or fail-node NODE" ;;
esac
