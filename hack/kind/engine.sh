#!/usr/bin/env bash
# Copyright 2026 The dra-failfast Authors.
# SPDX-License-Identifier: Apache-2.0

# The container engine the kind scripts use: Docker Engine from Debian's packages (docker.io),
# installed when absent and run as a plain process (no systemd needed), with all its state under
# _output/kind/docker and /run/dra-failfast-docker. It never touches the host's firewall: no
# iptables rules, no FORWARD policy, no IP forwarding, no docker0 bridge; kind's nodes talk over
# kind's own bridge network, and the API server is published by docker-proxy. Every container runs
# through hack/kind/runtime-wrapper (the host cannot grant every capability `--privileged` asks for).
#
# Containers of this engine can still change the host outside themselves: kind's privileged nodes
# run kubelets that write non-namespaced kernel tunables (protectKernelDefaults is off), and the
# engine creates /lib/modules, which kind mounts into every node, on a host that has none. start
# records these (once, until stop), stop puts them back and checks them.
#
# Usage: hack/kind/engine.sh start|stop|status|env
#   start   install docker.io if needed, record the host, start the daemon unless it already runs
#   stop    stop the daemon, unmount what it left, restore the host, check nothing of it remains
#   env     print the DOCKER_HOST line to eval in a shell
# A docker already on the machine is left alone; set DOCKER_HOST yourself to use it instead.
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=hack/kind/lib.sh
source "${REPO_ROOT}/hack/kind/lib.sh"

ENGINE_STATE="${KIND_DIR}/docker"
ENGINE_RUN=/run/dra-failfast-docker
ENGINE_SOCKET="${ENGINE_RUN}/docker.sock"
ENGINE_PID="${ENGINE_RUN}/docker.pid"
RUNTIME_NAME=dra-failfast-runc

HOST_RECORD="${KIND_DIR}/host-before-engine"
# The kernel tunables a kubelet sets at start (pkg/kubelet/cm: setupKernelTunables).
HOST_SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

# record_host writes what the engine's containers may change, unless a record is there already
# (the engine was started before and not stopped since: the first record is the host as found).
record_host() {
  [ -f "${HOST_RECORD}" ] && return 0
  mkdir -p "${KIND_DIR}"
  {
    local s
    for s in "${HOST_SYSCTLS[@]}"; do
      echo "sysctl ${s} $(cat "/proc/sys/${s}")"
    done
    if [ -e /lib/modules ]; then echo "path /lib/modules present"; else echo "path /lib/modules absent"; fi
    echo "forward-policy iptables $(iptables -S FORWARD 2>/dev/null | head -n1 | cut -d' ' -f3)"
    echo "forward-policy ip6tables $(ip6tables -S FORWARD 2>/dev/null | head -n1 | cut -d' ' -f3)"
    docker_bridges | sed 's/^/bridge /; s/$/ present/'
  } > "${HOST_RECORD}"
}

# docker_bridges prints the names of the bridges a docker daemon makes (docker0, br-<network id>).
docker_bridges() {
  ip -o link show type bridge 2>/dev/null | sed -nE 's/^[0-9]+: (br-[0-9a-f]{12}|docker0)[:@].*/\1/p'
}

# remove_left_bridges deletes the docker bridges that were not on the host when the engine was
# first started: a daemon that was killed (a machine restart) leaves its networks' bridges behind.
remove_left_bridges() {
  [ -f "${HOST_RECORD}" ] || return 0
  local b
  for b in $(docker_bridges); do
    grep -qx "bridge ${b} present" "${HOST_RECORD}" && continue
    log "removing bridge ${b} (left by a docker daemon that did not stop cleanly)"
    ip link delete "${b}" type bridge
  done
}

# restore_host puts back what record_host recorded and forgets the record.
restore_host() {
  [ -f "${HOST_RECORD}" ] || return 0
  local kind name value
  while read -r kind name value; do
    case "${kind}" in
      sysctl)
        if [ "$(cat "/proc/sys/${name}")" != "${value}" ]; then
          log "restoring sysctl ${name//\//.}=${value} (a node's kubelet set $(cat "/proc/sys/${name}"))"
          echo "${value}" > "/proc/sys/${name}"
        fi
        ;;
      path)
        # Only an empty directory the engine made: anything in it is not ours to remove.
        if [ "${value}" = absent ] && [ -d "${name}" ] && rmdir "${name}" 2>/dev/null; then
          log "removed ${name} (made by the engine for kind's mount)"
        fi
        ;;
    esac
  done < "${HOST_RECORD}"
}

# host_changes prints what differs from the record, one line each.
host_changes() {
  [ -f "${HOST_RECORD}" ] || return 0
  local kind name value now
  while read -r kind name value; do
    case "${kind}" in
      sysctl) now=$(cat "/proc/sys/${name}") ;;
      path) if [ -e "${name}" ]; then now=present; else now=absent; fi ;;
      forward-policy) now=$("${name}" -S FORWARD 2>/dev/null | head -n1 | cut -d' ' -f3) ;;
      *) continue ;;
    esac
    [ "${now}" = "${value}" ] || echo "${kind} ${name}: ${now} (was ${value})"
  done < "${HOST_RECORD}"
}

engine_running() {
  [ -f "${ENGINE_PID}" ] && kill -0 "$(cat "${ENGINE_PID}")" 2>/dev/null
}

install_engine() {
  command -v dockerd > /dev/null && return 0
  log "installing Debian's docker.io (services are not started: this script runs the daemon)"
  apt-get update -qq
  # policy-rc.d 101: the package's init scripts must not start a second daemon.
  local policy=/usr/sbin/policy-rc.d restore=false
  if [ ! -e "${policy}" ]; then
    printf '#!/bin/sh\nexit 101\n' > "${policy}"
    chmod +x "${policy}"
    restore=true
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io > /dev/null
  ! ${restore} || rm -f "${policy}"
}

start_engine() {
  if engine_running; then
    log "docker: already running (${ENGINE_SOCKET})"
    return 0
  fi
  install_engine
  record_host
  [ -x "${KIND_TOOLS_BIN}/runtime-wrapper" ] || go build -o "${KIND_TOOLS_BIN}/" "${REPO_ROOT}/hack/kind/runtime-wrapper"
  mkdir -p "${ENGINE_STATE}" "${ENGINE_RUN}"
  echo '{}' > "${ENGINE_STATE}/daemon.json"
  log "starting dockerd (state ${ENGINE_STATE#"${REPO_ROOT}/"}, socket ${ENGINE_SOCKET})"
  # setsid: the daemon outlives this script and is not killed with its process group.
  setsid dockerd --config-file "${ENGINE_STATE}/daemon.json" \
    --data-root "${ENGINE_STATE}/data" --exec-root "${ENGINE_RUN}/exec" --pidfile "${ENGINE_PID}" \
    -H "unix://${ENGINE_SOCKET}" --storage-driver overlay2 \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    --add-runtime "${RUNTIME_NAME}=${KIND_TOOLS_BIN}/runtime-wrapper" --default-runtime "${RUNTIME_NAME}" \
    > "${KIND_DIR}/dockerd.log" 2>&1 < /dev/null &
  local i
  for i in $(seq 1 60); do
    DOCKER_HOST="unix://${ENGINE_SOCKET}" docker version > /dev/null 2>&1 && break
    [ "${i}" -lt 60 ] || die "dockerd did not answer in 60 s; see ${KIND_DIR#"${REPO_ROOT}/"}/dockerd.log"
    sleep 1
  done
  log "docker: $(DOCKER_HOST="unix://${ENGINE_SOCKET}" docker version --format '{{.Server.Version}}') running"
}

stop_engine() {
  if engine_running; then
    local pid
    pid=$(cat "${ENGINE_PID}")
    log "stopping dockerd (pid ${pid})"
    kill "${pid}"
    local i
    for i in $(seq 1 60); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 1
    done
    kill -0 "${pid}" 2>/dev/null && die "dockerd (pid ${pid}) did not stop in 60 s"
  fi
  # Mounts the daemon or its containerd left (they block removing the state directories).
  local m
  awk -v a="${ENGINE_STATE}" -v b="${ENGINE_RUN}" '$5 ~ "^" a || $5 ~ "^" b {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do
      umount -l "${m}" 2>/dev/null || true
    done
  rm -rf "${ENGINE_RUN}"
  remove_left_bridges
  restore_host
  check_engine_gone
  rm -f "${HOST_RECORD}"
}

# check_engine_gone fails when anything of the engine remains on the host.
check_engine_gone() {
  local left=()
  pgrep -f "dockerd.*${ENGINE_SOCKET}" > /dev/null && left+=("a dockerd process")
  pgrep -f "containerd.*${ENGINE_RUN}" > /dev/null && left+=("a containerd process")
  grep -qE "${ENGINE_STATE}|${ENGINE_RUN}" /proc/self/mountinfo && left+=("mounts under the engine's directories")
  ip -o link show type bridge 2>/dev/null | grep -qE ': (br-[0-9a-f]{12}|docker0)[:@]' && left+=("a docker bridge")
  local cmd table change
  for cmd in iptables ip6tables; do
    for table in filter nat; do
      "${cmd}" -t "${table}" -S 2>/dev/null | grep -q -- '-N DOCKER' && left+=("DOCKER chains in ${cmd} ${table}")
    done
  done
  while read -r change; do
    [ -z "${change}" ] || left+=("${change}")
  done < <(host_changes)
  [ ${#left[@]} -eq 0 ] || die "the engine left: ${left[*]}"
  log "docker: stopped, nothing of it left on the host (no process, mount, bridge or DOCKER chain; kernel tunables, /lib/modules and the FORWARD policies as found)"
}

case "${1:-}" in
  start) start_engine ;;
  stop) stop_engine ;;
  status) engine_running && echo "running: DOCKER_HOST=unix://${ENGINE_SOCKET}" || echo "stopped" ;;
  env) echo "export DOCKER_HOST=unix://${ENGINE_SOCKET}" ;;
  *) sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
