// The console: log in with a token, show what it may see, and follow the manager's change feed to
// show changes as they happen (no reload).
import { ApiFailure, forgetToken, get, loadAll, post, savedToken, saveToken } from "./api.js";
import { h, replace } from "./dom.js";
import { topologyView } from "./topology.js";
import { networksView, portsView, tenantsView } from "./views.js";
import { routersView } from "./routers.js";
import { securityGroupsView } from "./security_groups.js";
import { clustersView } from "./clusters.js";
import { traceView } from "./trace.js";
import { chartsView } from "./charts.js";
import { floatingView } from "./floating.js";

const $ = (id) => document.getElementById(id);

const state = {
  session: null,
  data: null,
  shown: null,
  pod: undefined,
  tenant: undefined,
  /** The trace form as the user left it, and its last answer. */
  trace: { proto: "icmp" },
  /** How far back the charts reach. */
  minutes: 60,
  run: 0,
};

/** Sets the trace form's fields (drawn again when `redraw`: options depend on them) and runs it. */
const traceForm = {
  set(fields, redraw = false) {
    Object.assign(state.trace, fields);
    if (redraw) render();
  },
  async run() {
    const t = state.trace;
    const [tenant, network, port] = t.from.split("/");
    const [, toNetwork, toPort] = t.to.split("/");
    const body = {
      from: { network, port },
      to: { network: toNetwork, port: toPort },
      proto: t.proto,
      ...(t.proto !== "icmp" && t.dport ? { dport: Number(t.dport) } : {}),
    };
    Object.assign(state.trace, { busy: true, error: "", report: null });
    render();
    try {
      state.trace.report = await post(`/api/v1/tenants/${encodeURIComponent(tenant)}/trace`, body);
    } catch (err) {
      state.trace.error = err.message;
    }
    state.trace.busy = false;
    render();
  },
};

function choose(key) {
  return (value) => {
    state[key] = value;
    render();
  };
}

/** The views in page order: id, nav text, and the view of the data (null: not for this token). */
const VIEWS = [
  ["tenants", "Tenants", (data) => tenantsView(data.tenants)],
  ["networks", "Networks", (data) => networksView(data.networks)],
  ["routers", "Routers", (data) => routersView(data.routers)],
  [
    "security-groups",
    "Security groups",
    (data) => securityGroupsView(data.securityGroups, data.ports),
  ],
  // A tenant sees the nodes its ports are on, no others (an admin: every node, with or without).
  ["ports", "Ports by node", (data) => portsView(data.ports, data.infra ? data.nodes : [])],
  // Only an admin's data has it.
  ["clusters", "Clusters and nodes", (data) => data.infra && clustersView(data.infra, data.nodes)],
  ["trace", "Trace", (data) => traceView(data.ports, state.trace, traceForm)],
  [
    "metrics",
    "Metrics",
    (data) =>
      chartsView(data.charts, (minutes) => {
        state.minutes = minutes;
        refresh();
      }),
  ],
  [
    "topology",
    "Topology",
    (data) =>
      topologyView({
        ...data,
        chosen: state.pod,
        onChoose: choose("pod"),
        chosenTenant: state.tenant,
        onChooseTenant: choose("tenant"),
      }),
  ],
  [
    "floating",
    "Floating addresses",
    (data) => floatingView(data.floatingIps, data.floatingPools, data.ports),
  ],
];

function setLive(mode, text) {
  $("live").dataset.state = mode;
  $("live").textContent = text;
}

function showLogin(message = "") {
  state.run++;
  state.session = null;
  $("views").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  $("login").hidden = false;
  $("login-error").textContent = message;
  setLive("off", "not connected");
  $("token").focus();
}

function render() {
  const { data } = state;
  if (!data) return;
  const shown = VIEWS.map(([id, text, view]) => [id, text, view(data)]).filter(([, , el]) => el);
  replace(
    $("views"),
    h("nav", null, shown.map(([id, text]) => h("a", { href: `#${id}` }, text))),
    shown.map(([, , el]) => el),
  );
}

/** Reads everything again; draws the page again only when something changed (keeps focus). */
async function refresh() {
  const data = await loadAll(state.session, state.minutes);
  const text = JSON.stringify(data);
  if (text === state.shown) return;
  state.data = data;
  state.shown = text;
  render();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes a cursor, loads everything, then long-polls the feed from the cursor and loads again with
 * every page: at once when ports or nodes changed (usage changes with them), and at the latest when
 * a poll ends empty, for what the feed does not carry (tenants, networks, clusters, node reports). A 410 starts over; other
 * failures retry with a growing pause.
 */
async function follow(run) {
  let cursor;
  let pause = 500;
  while (run === state.run) {
    try {
      if (cursor === undefined) {
        cursor = (await get("/console/feed")).cursor;
        await refresh();
        setLive("live", "live");
      }
      const page = await get(`/console/feed?after=${encodeURIComponent(cursor)}&timeout=25`);
      if (run !== state.run) return;
      cursor = page.cursor;
      pause = 500;
      setLive("live", "live");
      await refresh();
    } catch (err) {
      if (run !== state.run) return;
      if (err instanceof ApiFailure && err.status === 401) {
        forgetToken();
        return showLogin(err.message);
      }
      if (err instanceof ApiFailure && err.status === 410) {
        cursor = undefined;
        continue;
      }
      setLive("error", `reconnecting: ${err.message}`);
      await sleep(pause);
      pause = Math.min(pause * 2, 15000);
    }
  }
}

async function start() {
  if (!savedToken()) return showLogin();
  let session;
  try {
    session = await get("/console/session");
  } catch (err) {
    forgetToken();
    return showLogin(err instanceof ApiFailure ? err.message : `Cannot reach the manager: ${err}`);
  }
  state.session = session;
  state.shown = null;
  state.run++;
  $("login").hidden = true;
  $("views").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = session.scope === "admin" ? "admin" : `tenant ${session.tenant}`;
  setLive("connecting", "connecting");
  follow(state.run);
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  $("token").value = "";
  if (!token) return;
  saveToken(token);
  start();
});

$("logout").addEventListener("click", () => {
  forgetToken();
  state.data = null;
  state.shown = null;
  replace($("views"));
  showLogin();
});

start();
