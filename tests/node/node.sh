#!/usr/bin/env bash
# One Kubernetes node on this machine for the end-to-end tests, and the supervisor that takes it
# down again: containerd and runc (Debian's), the bridge and host-local CNI plugins (Debian's),
# kubelet, kube-proxy, kube-scheduler and CoreDNS (tests/node/build.sh).
#
#   node.sh run    prepare the host (state snapshot, pod bridge), print "prepared", then on a
#                  "start" line on standard input start the node and print "started"; when
#                  standard input closes (however the test process ended), or on a signal, stop
#                  everything and restore the host.
#   node.sh clean  restore the host after a run whose supervisor itself was killed.
#   node.sh wait   wait until a running supervisor has restored the host.
#
# Environment: NODE_DIR (state; fixed, so a later run finds what a killed one left), and for
# run: NODE_BIN (the built binaries), NODE_IMAGES (image archives to import), NODE_BRIDGE,
# NODE_BRIDGE_IP, POD_CIDR, SERVICE_CIDR, PAUSE_IMAGE, NODE_NAME. The caller writes
# $NODE_DIR/admin.kubeconfig and $NODE_DIR/kubelet.kubeconfig before sending "start".
# One node at a time per machine (a lock): kube-proxy's chains and the kubelet's cgroups are
# machine-wide.
set -uo pipefail
# Whoever reads our output may be gone (the test process ended): restoring the host goes on.
trap '' PIPE

: "${NODE_DIR:?NODE_DIR is required}"
snap="$NODE_DIR/snapshot"
lock=${NODE_LOCK:-/run/lock/bucket-provisioner-node.lock}
# Host paths the node's programs create; the ones that did not exist before a run are removed.
HOST_PATHS=(/var/lib/bucket-provisioner /var/lib/bucket-provisioner-cosi /var/lib/hostpath-volumes /var/log/containers /var/log/pods /run/netns
  /run/containerd /var/lib/cni /var/lib/kubelet /etc/cni /opt/cni /opt/containerd
  /var/lib/containerd /etc/kubernetes /run/calico /var/lib/calico)
# Mounts under these (and NODE_DIR) that appeared during a run are unmounted.
MOUNT_ROOTS=(/run/netns /run/containerd /var/lib/kubelet /var/lib/containerd)

log() { echo "node: $*" >&2; }

# Sysctls that change by themselves or cannot be written back.
volatile_sysctl() {
  case $1 in
    kernel.ns_last_pid | kernel.random.* | kernel.pty.nr | fs.* | *nf_conntrack_count | \
      *.stable_secret | vm.drop_caches | dev.*) return 0 ;;
  esac
  return 1
}

iptables_dump() { # family-save-command
  "$1" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[0:0]/'
}

mount_points() {
  awk '{ print $5 }' /proc/self/mountinfo | sort -u
}

snapshot() {
  rm -rf "$snap.partial"
  mkdir -p "$snap.partial"
  sysctl -a 2>/dev/null | sort >"$snap.partial/sysctl"
  iptables-save >"$snap.partial/iptables" 2>/dev/null
  ip6tables-save >"$snap.partial/ip6tables" 2>/dev/null
  iptables_dump iptables-save >"$snap.partial/iptables.norm"
  iptables_dump ip6tables-save >"$snap.partial/ip6tables.norm"
  if command -v nft >/dev/null; then nft list tables 2>/dev/null | sort >"$snap.partial/nft"; fi
  mount_points >"$snap.partial/mounts"
  find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort >"$snap.partial/cgroups"
  ls /run/netns 2>/dev/null | sort >"$snap.partial/netns"
  ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort >"$snap.partial/links"
  : >"$snap.partial/paths"
  for p in "${HOST_PATHS[@]}"; do [[ -e $p || -L $p ]] && echo "$p" >>"$snap.partial/paths"; done
  mv "$snap.partial" "$snap"
}

# Every process whose command line names NODE_DIR (containerd, its shims, kubelet, ...).
our_pids() {
  local p pid cmd
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
    [[ $cmd == *"$NODE_DIR"* ]] && echo "$pid"
  done
}

new_cgroups() {
  [[ -f $snap/cgroups ]] || return 0
  comm -13 "$snap/cgroups" <(find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort)
}

# Stops every process of the node and restores what the node changed on the host. Idempotent:
# it also finishes the work of a supervisor that was killed part way.
cleanup() {
  local started=$SECONDS
  log "stopping and restoring the host..."
  # Programs first, the kubelet before all, so nothing restarts what is being stopped.
  local pid
  for name in kubelet kube-scheduler kube-proxy coredns containerd; do
    [[ -f $NODE_DIR/$name.pid ]] && kill -TERM "$(cat "$NODE_DIR/$name.pid")" 2>/dev/null
  done
  sleep 1
  for pid in $(our_pids); do kill -KILL "$pid" 2>/dev/null; done
  # Containers: every process in a cgroup the kubelet made.
  local cg round
  for round in 1 2 3 4 5; do
    local left=0
    for cg in $(new_cgroups | grep kubepods); do
      [[ -f $cg/freezer.state ]] && echo THAWED >"$cg/freezer.state" 2>/dev/null
      for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; left=1; done
    done
    [[ $left == 0 ]] && break
    sleep 0.5
  done
  for pid in $(our_pids); do kill -KILL "$pid" 2>/dev/null; done
  # kube-proxy removes its own chains.
  if [[ -x ${NODE_BIN:-}/kube-proxy ]]; then
    "$NODE_BIN/kube-proxy" --cleanup >>"$NODE_DIR/kube-proxy-cleanup.log" 2>&1 || true
  fi

  if [[ -f $snap/mounts ]]; then
    # Deepest first; lazily if still busy.
    local m roots=("$NODE_DIR" "${MOUNT_ROOTS[@]}") root
    comm -13 "$snap/mounts" <(mount_points) | sort -r | while read -r m; do
      m=$(printf '%b' "$m")
      for root in "${roots[@]}"; do
        if [[ $m == "$root" || $m == "$root"/* ]]; then
          umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
          break
        fi
      done
    done
  fi
  if [[ -f $snap/netns ]]; then
    local ns
    for ns in $(comm -13 "$snap/netns" <(ls /run/netns 2>/dev/null | sort)); do
      umount "/run/netns/$ns" 2>/dev/null
      rm -f "/run/netns/$ns"
    done
  fi
  if [[ -f $snap/links ]]; then
    local link
    for link in $(comm -13 "$snap/links" <(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort)); do
      ip link delete "$link" 2>/dev/null
    done
  fi
  # Cgroups, leaves first.
  for cg in $(new_cgroups | sort -r); do
    rmdir "$cg" 2>/dev/null || { sleep 0.2; rmdir "$cg" 2>/dev/null; } || log "cannot remove cgroup $cg"
  done

  if [[ -f $snap/iptables ]]; then
    local family
    for family in iptables ip6tables; do
      if ! diff -q "$snap/$family.norm" <(iptables_dump "$family-save") >/dev/null; then
        "$family-restore" <"$snap/$family" 2>/dev/null || log "$family-restore failed"
        # Tables that did not exist before: emptied (iptables-restore only knows its own).
        local table
        for table in $(comm -13 <(grep '^\*' "$snap/$family" | sort) <("$family-save" 2>/dev/null | grep '^\*' | sort)); do
          "$family" -t "${table#\*}" -F 2>/dev/null
          "$family" -t "${table#\*}" -X 2>/dev/null
        done
        log "$family rules restored"
      fi
    done
  fi
  if [[ -f $snap/nft ]] && command -v nft >/dev/null; then
    local table
    # "table FAMILY NAME" lines; iptables-nft leaves its tables behind once used.
    comm -13 "$snap/nft" <(nft list tables 2>/dev/null | sort) | while read -r table; do
      # shellcheck disable=SC2086 # the line's words are the command's
      nft delete $table 2>/dev/null || log "cannot remove nftables $table"
    done
  fi
  if [[ -f $snap/sysctl ]]; then
    local key value restored=()
    while IFS= read -r line; do
      key=${line%% = *}
      value=${line#* = }
      volatile_sysctl "$key" && continue
      sysctl -q -w "$key=$value" >/dev/null 2>&1 && restored+=("$key")
    done < <(comm -23 "$snap/sysctl" <(sysctl -a 2>/dev/null | sort))
    [[ ${#restored[@]} -gt 0 ]] && log "sysctls restored: ${restored[*]}"
  fi
  if [[ -f $snap/paths ]]; then
    local p
    for p in "${HOST_PATHS[@]}"; do
      if ! grep -qxF "$p" "$snap/paths" && [[ -e $p || -L $p ]]; then rm -rf "$p"; fi
    done
    # Log links the kubelet made in a directory that was already there.
    if grep -qxF /var/log/containers "$snap/paths"; then
      find /var/log/containers -maxdepth 1 -type l -lname "$NODE_DIR/*" -delete 2>/dev/null
    fi
  fi
  rm -rf "$NODE_DIR"
  log "host restored in $((SECONDS - started))s"
}

wait_for() { # what seconds command...
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      log "$what did not come up in ${limit}s"
      return 1
    fi
    sleep 0.2
  done
}

start_program() { # name argv...
  local name=$1
  shift
  # Without the lock's descriptor: if this supervisor is killed, the lock must go with it, so the
  # next run can take it and clean up after these programs.
  "$@" 9>&- >"$NODE_DIR/$name.log" 2>&1 &
  echo $! >"$NODE_DIR/$name.pid"
}

write_configs() {
  local d=$NODE_DIR
  mkdir -p "$d/cni" "$d/pod-logs" "$d/kubelet"
  : >"$d/resolv.conf"
  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
# Plugins that would write outside the state directory or need what this machine lacks.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$d/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without it every sandbox fails: runc may not lower oom_score_adj here.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$d/runc"
        SystemdCgroup = false
EOF
  # Pods get addresses on the bridge and a route to Services only: no default route, so nothing
  # in a pod can reach beyond this machine.
  cat >"$d/cni/10-bucket-provisioner.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "bucket-provisioner-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$d/cni-ipam",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$NODE_BRIDGE_IP" }]],
        "routes": [{ "dst": "$SERVICE_CIDR", "gw": "$NODE_BRIDGE_IP" }]
      }
    }
  ]
}
EOF
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
# This machine has cgroup v1 hierarchies and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$d/containerd.sock
clusterDNS: ["$NODE_BRIDGE_IP"]
clusterDomain: cluster.local
resolvConf: $d/resolv.conf
# No KUBE-* chains from the kubelet in the host's iptables.
makeIPTablesUtilChains: false
podLogsDirectory: $d/pod-logs
# The images exist only here and can never be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The host's disk is shared with build caches and is often nearly full: a test node that rejects
# or evicts pods for DiskPressure fails tests that judge nothing about disk. 0% turns a signal off.
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
serializeImagePulls: false
maxPods: 30
syncFrequency: 10s
fileCheckFrequency: 5s
EOF
  cat >"$d/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $d/admin.kubeconfig
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
# Zero leaves the host's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  # Otherwise it sets route_localnet for NodePorts on 127.0.0.1.
  localhostNodePorts: false
  minSyncPeriod: 0s
  syncPeriod: 30s
EOF
  cat >"$d/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $NODE_BRIDGE_IP
    errors
    ready 127.0.0.1:$COREDNS_READY_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $d/admin.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
EOF
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_node() {
  local d=$NODE_DIR started=$SECONDS
  KUBELET_PORT=$(free_port) KUBELET_HEALTHZ_PORT=$(free_port) PROXY_HEALTHZ_PORT=$(free_port)
  PROXY_METRICS_PORT=$(free_port) COREDNS_READY_PORT=$(free_port)
  write_configs
  # Said up front: a disk that fills during the run is a likelier cause of odd failures than code.
  log "$(df -h --output=avail "$d" | tail -1 | tr -d ' ') free on the disk under $d"
  start_program containerd containerd --config "$d/containerd.toml"
  wait_for containerd 60 ctr --address "$d/containerd.sock" version || return 1
  local image
  for image in "$NODE_IMAGES"/*.tar; do
    ctr --address "$d/containerd.sock" -n k8s.io images import "$image" >>"$d/images.log" 2>&1 \
      || { log "importing $image failed"; return 1; }
  done
  log "containerd up, $(ls "$NODE_IMAGES"/*.tar | wc -l) images imported ($((SECONDS - started))s)"
  start_program kubelet "$NODE_BIN/kubelet" --config="$d/kubelet.yaml" \
    --kubeconfig="$d/kubelet.kubeconfig" --hostname-override="$NODE_NAME" \
    --root-dir="$d/kubelet" --v=1
  start_program kube-proxy "$NODE_BIN/kube-proxy" --config="$d/kube-proxy.yaml" --v=1
  start_program kube-scheduler "$NODE_BIN/kube-scheduler" --kubeconfig="$d/admin.kubeconfig" \
    --authentication-kubeconfig="$d/admin.kubeconfig" \
    --authorization-kubeconfig="$d/admin.kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0
  start_program coredns "$NODE_BIN/coredns" -conf "$d/Corefile" -dns.port 53
  wait_for kubelet 60 curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" || return 1
  wait_for CoreDNS 60 curl -sf "http://127.0.0.1:$COREDNS_READY_PORT/ready" || return 1
  log "kubelet, kube-proxy, kube-scheduler and CoreDNS up ($((SECONDS - started))s)"
}

run() {
  mkdir -p "$(dirname "$lock")"
  exec 9>"$lock"
  if ! flock -n 9; then
    log "waiting for another node on this machine to stop..."
    flock 9
  fi
  # A run whose supervisor was killed left its snapshot: finish its cleanup first.
  if [[ -d $snap ]]; then
    log "restoring the host after an earlier run that did not finish"
    cleanup
  fi
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  local root
  for root in /var/lib/bucket-provisioner /var/lib/bucket-provisioner-cosi; do
    if [[ -e $root ]]; then
      log "$root exists: the tests deploy deploy/hostpath/ and deploy/cosi/hostpath/, whose buckets live there"
      echo failed
      exit 1
    fi
  done
  snapshot
  trap 'cleanup; exit 0' TERM INT HUP
  ip link add "$NODE_BRIDGE" type bridge &&
    ip addr add "$NODE_BRIDGE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE" &&
    ip link set "$NODE_BRIDGE" up || {
    log "cannot make the pod bridge $NODE_BRIDGE"
    echo failed
    cleanup
    exit 1
  }
  echo prepared
  local command
  if read -r command && [[ $command == start ]]; then
    if start_node; then echo started; else echo failed; fi
    read -r _
  fi
  cleanup
}

case ${1:-} in
  run) run ;;
  clean)
    exec 9>"$lock"
    flock 9
    [[ -d $snap ]] && cleanup
    ;;
  wait)
    exec 9>"$lock"
    flock 9
    ;;
  *)
    echo "usage: NODE_DIR=... $0 run|clean|wait" >&2
    exit 2
    ;;
esac
