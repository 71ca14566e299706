#!/usr/bin/env bash
# Installs what the tasks need on a fresh machine: deno (from the npm package) into .tools/,
# and, when root, the Debian packages the real-dataplane tests use. Idempotent and quiet when done.
set -euo pipefail
cd "$(dirname "$0")/.."

DENO_VERSION=2.9.6
# podman, runc (named: podman would take crun otherwise), conmon, busybox-static and tar are for the
# real-runtime test (tests/e2e_podman_test.ts). It gives podman a configuration of its own
# (CONTAINERS_CONF), so nothing is written to /etc/containers here. chromium is the real browser
# the web console's test drives headless (tests/console_browser_test.ts). gcc and libc6-dev build the
# CNI plugin, a static C program (plugin/build.ts).
DEBIAN_PACKAGES=(gcc libc6-dev iproute2 ethtool socat openssl openvswitch-switch iputils-ping iperf3 util-linux containernetworking-plugins iptables tcpdump etcd-server etcd-client podman runc conmon busybox-static tar chromium fonts-liberation arping)
# prometheus (promtool with it) is for tests/prometheus*_test.ts, which run their own on a free
# port. It comes without its Recommends (node exporter, smartmontools, ipmi: daemons of their own),
# and its service is neither started (policy-rc.d below) nor enabled: nothing listens on 9090.
# bird2 (BIRD 2) is the BGP daemon each agent runs for itself (agent/bgp/) and the external
# router of tests/e2e_bgp_test.ts; its own service is neither started nor enabled either.
SERVICE_PACKAGES=(prometheus bird2)

mkdir -p .tools/bin
if [ ! -x .tools/bin/deno ] || ! .tools/bin/deno --version 2>/dev/null | grep -q "^deno $DENO_VERSION "; then
  if ! command -v npm >/dev/null; then
    echo "setup: npm is needed to install deno $DENO_VERSION (install Node.js and npm first)" >&2
    exit 1
  fi
  echo "setup: installing deno $DENO_VERSION from the npm package into .tools/" >&2
  npm install --prefix .tools --no-save --no-audit --no-fund --loglevel=error "deno@$DENO_VERSION" >&2
  ln -sf ../node_modules/deno/deno .tools/bin/deno
fi
# make test-quick: deno is all the unit tests need.
[ "${1:-}" = "--deno-only" ] && exit 0

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do installed "$pkg" || missing+=("$pkg"); done
missing_services=()
for pkg in "${SERVICE_PACKAGES[@]}"; do installed "$pkg" || missing_services+=("$pkg"); done
all_missing=("${missing[@]}" "${missing_services[@]}")
if [ ${#all_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${all_missing[*]}; run as root or: sudo apt-get install -y ${all_missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing Debian packages: ${all_missing[*]}" >&2
  apt-get update -qq >&2
fi
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
if [ ${#missing_services[@]} -gt 0 ]; then
  # Debian starts a package's service at install (invoke-rc.d, deb-systemd-invoke) unless
  # policy-rc.d says no: here it does, for this install only (a machine's own policy-rc.d, as in
  # containers, is left as it is). Then the service is disabled for the next boots too.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing_services[@]}" >&2
  for svc in "${missing_services[@]}"; do
    systemctl disable "$svc.service" >/dev/null 2>&1 || true
    update-rc.d "$svc" disable >/dev/null 2>&1 || true
  done
fi
