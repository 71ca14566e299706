#!/bin/sh
# Installs the CNI plugin and its conflist on the node (the agent DaemonSet's install-cni init
# container), then, with KNITTER_CNI_WATCH_SECONDS > 0 (its cni-keeper container), keeps them in
# place: every so many seconds, a conflist or plugin that someone else changed or deleted is
# written again. The conflist chains, after knitter, each meta-plugin of KNITTER_CNI_CHAIN
# (portmap, bandwidth, tuning) whose binary is in CNI_BIN_DIR; one installed later is chained then.
# Each file is written beside its target and renamed: a runtime never reads half a file.
set -eu
: "${KNITTER_PLUGIN_SRC:?}" "${KNITTER_CONFLIST_SRC:?}" "${CNI_BIN_DIR:?}" "${CNI_CONF_DIR:?}"
chain="${KNITTER_CNI_CHAIN-portmap bandwidth tuning}"
every="${KNITTER_CNI_WATCH_SECONDS:-0}"
bin="$CNI_BIN_DIR/knitter"
conf="$CNI_CONF_DIR/10-knitter.conflist"
bin_tmp="$CNI_BIN_DIR/.knitter.tmp"
conf_tmp="$CNI_CONF_DIR/.10-knitter.conflist.tmp"
trap 'rm -f "$bin_tmp" "$conf_tmp"' EXIT
trap 'exit 0' TERM INT

# What each chained plugin's entry is: the capabilities the runtime fills in for it.
entry() {
  case "$1" in
    portmap) echo '{ "type": "portmap", "capabilities": { "portMappings": true } }' ;;
    bandwidth) echo '{ "type": "bandwidth", "capabilities": { "bandwidth": true } }' ;;
    tuning) echo '{ "type": "tuning" }' ;;
    *) echo "install-cni: unknown meta-plugin \"$1\" in KNITTER_CNI_CHAIN (known: portmap bandwidth tuning)" >&2; exit 2 ;;
  esac
}

# The conflist to install: the shipped one, with the chained entries put before the line "  ]"
# that closes its plugin list.
desired() {
  extra=""
  for p in $chain; do
    e=$(entry "$p")
    if [ -x "$CNI_BIN_DIR/$p" ]; then extra="$extra    , $e
"; fi
  done
  awk -v extra="$extra" '$0 == "  ]" && !done { printf "%s", extra; done = 1 } { print }' \
    "$KNITTER_CONFLIST_SRC"
}

install_once() {
  if ! cmp -s "$KNITTER_PLUGIN_SRC" "$bin"; then
    install -m 0755 "$KNITTER_PLUGIN_SRC" "$bin_tmp"
    mv -f "$bin_tmp" "$bin"
    echo "installed $bin"
  fi
  desired > "$conf_tmp"
  if cmp -s "$conf_tmp" "$conf"; then
    rm -f "$conf_tmp"
  else
    chmod 0644 "$conf_tmp"
    mv -f "$conf_tmp" "$conf"
    echo "installed $conf (chained:$(for p in $chain; do [ -x "$CNI_BIN_DIR/$p" ] && printf ' %s' "$p"; done; true))"
  fi
}

install_once
[ "$every" -gt 0 ] || exit 0
while :; do
  sleep "$every" &
  wait $! || true
  install_once
done
