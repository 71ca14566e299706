/**
 * The manager's web console in a real browser: Debian's headless Chromium, driven by
 * playwright-core, against a running manager (HTTP on loopback, Deno KV). A tenant logs in and
 * sees its own tenant, networks with the usage of their pools, ports by node and a pod's topology,
 * and nothing of another tenant's; a port made through the API appears without a reload; the
 * screenshot is a real picture. Names and descriptions a tenant chose are shown as text, and the
 * page's Content-Security-Policy runs no inline script.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { ConfigSchema } from "../manager/config.ts";
import { startManager } from "../manager/mod.ts";
import { launchChromium, type TestBrowser } from "./support/browser.ts";
import { attrs, logIn, openConsole, submitToken, texts } from "./support/console_page.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { colourStats, decodePng, pixel } from "./support/png.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;
const GLOBEX = `globex-${crypto.randomUUID()}`;

interface Env {
  url: string;
  /** One API call; fails the test on an unexpected status. */
  api(
    method: string,
    path: string,
    opts?: { body?: unknown; token?: string; status?: number },
  ): Promise<
    // deno-lint-ignore no-explicit-any
    any
  >;
  browser: TestBrowser;
}

async function withConsole(fn: (env: Env) => Promise<void>): Promise<void> {
  await using cleanup = new Cleanup();
  const dir = await cleanup.tempDir();
  const manager = await startManager(ConfigSchema.parse({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [
      { token: ADMIN, scope: "admin" },
      { token: ACME, scope: "tenant", tenant: "acme" },
      { token: GLOBEX, scope: "tenant", tenant: "globex" },
    ],
    vniRanges: ["5000-5999"],
    bgp: { advertisableRanges: ["10.0.0.0/8"] },
    // Released addresses stay in quarantine through the test: the bars show them.
    quarantineSeconds: 600,
    logLevel: "error",
  }));
  cleanup.defer(() => manager.shutdown());
  const api: Env["api"] = async (method, path, { body, token = ADMIN, status } = {}) => {
    const res = await fetch(`${manager.url}/api/v1/${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const expected = status ?? (method === "POST" ? 201 : method === "DELETE" ? 204 : [200, 201]);
    const ok = Array.isArray(expected) ? expected.includes(res.status) : res.status === expected;
    assert.ok(ok, `${method} ${path}: expected ${expected}, got ${res.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const browser = await launchChromium(cleanup);
  await fn({ url: manager.url, api, browser });
}

/** The views a tenant's token shows, in page order; an admin's has "Clusters and nodes" too. */
const TENANT_VIEWS = [
  "Tenants",
  "Networks",
  "Routers",
  "Security groups",
  "Ports by node",
  "Trace",
  "Metrics",
  "Topology",
  "Floating addresses",
];

/** The one pod's diagram and the tenant's whole picture in the topology section. */
const POD_TITLE = "#topology svg.topology:not(.tenant-topology) .pod-box text.title";
const TENANT_PICTURE = "#topology svg.tenant-topology";

Deno.test("console: a tenant sees its networks, pools, ports by node and a pod's topology, live, in Chromium", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    await api("POST", "tenants", { body: { name: "acme" } });
    await api("POST", "tenants", { body: { name: "globex" } });
    await api("PUT", "nodes/n1", { body: { underlayIp: "192.0.2.1" } });
    await api("PUT", "nodes/n2", { body: { underlayIp: "192.0.2.2" } });
    const control = await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "control", cidr: "10.10.0.0/28", description: "control plane" },
    });
    const data = await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "data", cidr: "10.20.0.0/24", cidr6: "fd00:20::/64", dataPlane: "external" },
    });
    await api("POST", "tenants/globex/networks", {
      token: GLOBEX,
      body: { name: "secret", cidr: "10.10.0.0/24", description: "globex only" },
    });
    const port = (net: string, id: string, node: string, pod: string, ifname: string) =>
      api("PUT", `tenants/acme/networks/${net}/ports/${id}`, {
        body: { node, pod: { namespace: "acme", name: pod }, interface: ifname },
      });
    const p1 = await port("control", "edge-eth0", "n1", "edge", "eth0");
    const p2 = await port("data", "edge-net1", "n1", "edge", "net1");
    const p3 = await port("control", "ctl-eth0", "n2", "ctl", "eth0");
    await port("control", "gone-eth0", "n2", "gone", "eth0");
    await api("DELETE", "tenants/acme/networks/control/ports/gone-eth0");
    await api("PUT", "tenants/globex/networks/secret/ports/hidden-eth0", {
      body: { node: "n1", pod: { namespace: "globex", name: "hidden" }, interface: "eth0" },
    });

    const requests: { url: string; authorization?: string }[] = [];
    const page = await logIn(env, ACME);
    page.on(
      "request",
      (r) => requests.push({ url: r.url(), authorization: r.headers().authorization }),
    );

    // What a person looks for: the title, who is logged in, the views (a tenant's: no clusters).
    assert.equal(await page.locator("h1").textContent(), "Knitter console");
    assert.equal(await page.locator("#who").textContent(), "tenant acme");
    assert.deepEqual(await texts(page, "#views h2"), TENANT_VIEWS);
    assert.deepEqual(await texts(page, "#tenants tbody tr td:first-child"), ["acme"]);

    // Its networks, with bars of their pools; nothing of globex anywhere on the page.
    assert.deepEqual(
      await page.locator("#networks tr.network").evaluateAll((rows) =>
        rows.map((r) => r.getAttribute("data-network"))
      ),
      ["control", "data"],
    );
    // A network another plugin carries (the knitter IPAM's) says so.
    assert.deepEqual(await texts(page, '#networks tr.network[data-network="data"] .tag'), [
      "external data plane",
    ]);
    assert.deepEqual(await texts(page, '#networks tr.network[data-network="control"] .tag'), []);
    const body = await page.locator("body").textContent() ?? "";
    for (const word of ["globex", "secret", "hidden"]) {
      assert.ok(!body.includes(word), `the page shows "${word}" of another tenant`);
    }
    const controlUsage = await api("GET", "tenants/acme/networks/control", { token: ACME });
    assert.equal(controlUsage.usage.used, 2, "edge-eth0 and ctl-eth0 hold addresses");
    assert.equal(
      controlUsage.usage.total - controlUsage.usage.used - controlUsage.usage.free,
      1,
      "gone-eth0's address is in quarantine",
    );
    assert.equal(controlUsage.usage.total, control.usage.total);
    await checkBar(page, "control", { total: control.usage.total, used: 2, quarantined: 1 });
    await checkBar(page, "data", { total: data.usage.total, used: 1, quarantined: 0 });

    // Ports by node: its own, under the node that has each.
    assert.deepEqual(
      await texts(page, "#ports .node h3"),
      ["Node n1 (2)", "Node n2 (1)"],
    );
    assert.deepEqual(
      await texts(page, '#ports .node[data-node="n1"] tr.port td:first-child'),
      [p1.id, p2.id],
    );
    assert.deepEqual(
      await texts(page, '#ports .node[data-node="n2"] tr.port td:first-child'),
      [p3.id],
    );
    assert.deepEqual(
      await texts(page, '#ports tr.port[data-port="edge-eth0"] td.addr'),
      [p1.address, p1.mac],
    );
    // A dual-stack network (data) shows both subnets, its ports both addresses.
    assert.deepEqual(
      await texts(page, '#networks tr.network[data-network="data"] td.addr'),
      ["10.20.0.0/24, fd00:20::/64"],
    );
    assert.deepEqual(
      await texts(page, '#ports tr.port[data-port="edge-net1"] td.addr'),
      [`${p2.address}, ${p2.address6}`, p2.mac],
    );

    // The topology of pod acme/edge: two interfaces, each linked to its network.
    await page.selectOption("#pod-picker", "acme/edge");
    const topology = page.locator("#topology svg.topology:not(.tenant-topology)");
    assert.deepEqual(await texts(page, POD_TITLE), ["acme/edge"]);
    assert.deepEqual(
      await topology.locator("g.iface").evaluateAll((els) =>
        els.map((e) => e.getAttribute("data-interface"))
      ),
      ["eth0", "net1"],
    );
    assert.deepEqual(
      await topology.locator("line.link").evaluateAll((els) =>
        els.map((e) => `${e.getAttribute("data-interface")}->${e.getAttribute("data-network")}`)
      ),
      ["eth0->acme/control", "net1->acme/data"],
    );
    assert.deepEqual(
      await texts(page, '#topology g.iface[data-interface="net1"] text'),
      ["net1", p2.address, p2.mac],
    );

    // A port made through the API appears without a reload: the page's own marker stays.
    await page.evaluate(() => Object.assign(globalThis, { consoleMarker: "no reload" }));
    const p5 = await port("data", "ctl-net1", "n2", "ctl", "net1");
    const row = page.locator('#ports .node[data-node="n2"] tr.port[data-port="ctl-net1"]');
    await row.waitFor();
    assert.deepEqual(await row.locator("td.addr").allTextContents(), [
      `${p5.address}, ${p5.address6}`,
      p5.mac,
    ]);
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "consoleMarker")), "no reload");
    await checkBar(page, "data", { total: data.usage.total, used: 2, quarantined: 0 });
    assert.deepEqual(
      await texts(page, '#ports .node[data-node="n2"] tr.port td:first-child'),
      ["ctl-eth0", "ctl-net1"],
    );
    // Released: the row goes, and its address moves to quarantine in the bar.
    await api("DELETE", "tenants/acme/networks/data/ports/ctl-net1");
    await row.waitFor({ state: "detached" });
    await checkBar(page, "data", { total: data.usage.total, used: 1, quarantined: 1 });
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "consoleMarker")), "no reload");

    // The token went as a header, never in a URL.
    assert.ok(requests.length > 0, "the page made requests after logging in");
    for (const r of requests) {
      assert.ok(!r.url.includes(ACME), `the token is in a URL: ${r.url}`);
      const path = new URL(r.url).pathname;
      if (path.startsWith("/api/") || path === "/console/feed" || path === "/console/session") {
        assert.equal(r.authorization, `Bearer ${ACME}`, `no token sent with ${r.url}`);
      }
    }
    assert.equal(
      await page.evaluate(() => sessionStorage.getItem("knitter-console-token")),
      ACME,
    );

    // The screenshot is a picture of a page: its size, many colours, the dark header at the top,
    // the bar's blue where the used part of control's bar is drawn.
    const shot = await page.screenshot({ fullPage: true });
    const saveTo = Deno.env.get("KNITTER_TEST_SCREENSHOTS");
    if (saveTo) await Deno.writeFile(`${saveTo}/console.png`, shot);
    const png = decodePng(shot);
    const height = await page.evaluate<number>("document.documentElement.scrollHeight");
    assert.equal(png.height, height, "the whole page, as laid out");
    // The viewport's width, less a scrollbar's.
    assert.ok(png.width > 1200 && png.width <= 1280, `width ${png.width}`);
    assert.ok(png.height >= 900 && png.height < 10_000, `height ${png.height}`);
    const stats = colourStats(png);
    assert.ok(stats.distinct >= 50, `only ${stats.distinct} colours: a blank page?`);
    assert.ok(stats.dominantShare < 0.9, `one colour covers ${stats.dominantShare} of the page`);
    assert.equal(pixel(png, 4, 4), "#1d2430", "the header bar");
    const used = await page.locator('tr.network[data-network="control"] .part.used').boundingBox();
    assert.ok(used && used.width >= 1);
    const at = await page.evaluate<{ x: number; y: number }>("({ x: scrollX, y: scrollY })");
    assert.equal(
      pixel(png, Math.floor(used.x + at.x + used.width / 2), Math.floor(used.y + at.y + 6)),
      "#2f6fdb",
      "the used part of control's bar",
    );

    // Logging out forgets the token and what was shown. An admin sees every tenant, and globex's
    // network and port beside acme's.
    await page.click("#logout");
    await page.locator("#login").waitFor({ state: "visible" });
    assert.equal(
      await page.evaluate(() => sessionStorage.getItem("knitter-console-token")),
      null,
    );
    assert.equal(await page.locator("#views tr").count(), 0);
    await submitToken(page, ADMIN);
    assert.equal(await page.locator("#who").textContent(), "admin");
    assert.deepEqual(await texts(page, "#tenants tbody tr td:first-child"), [
      "acme",
      "admin",
      "globex",
    ]);
    assert.deepEqual(
      await page.locator("#networks tr.network").evaluateAll((rows) =>
        rows.map((r) => `${r.getAttribute("data-tenant")}/${r.getAttribute("data-network")}`)
      ),
      ["acme/control", "acme/data", "globex/secret"],
    );
    assert.deepEqual(
      await texts(page, '#ports .node[data-node="n1"] tr.port td:first-child'),
      ["edge-eth0", "edge-net1", "hidden-eth0"],
    );
  });
});

/** The bar of a network: the numbers it carries and says, and the width of its parts. */
async function checkBar(
  page: Page,
  network: string,
  want: { total: number; used: number; quarantined: number },
): Promise<void> {
  const usage = page.locator(`#networks tr.network[data-network="${network}"] .usage`);
  // The bar follows the feed: wait until it shows what is wanted, then check all of it.
  await page.locator(
    `#networks tr.network[data-network="${network}"] .usage[data-used="${want.used}"]`,
  ).waitFor();
  assert.equal(await usage.getAttribute("data-total"), String(want.total));
  assert.equal(await usage.getAttribute("data-quarantined"), String(want.quarantined));
  const free = want.total - want.used - want.quarantined;
  assert.equal(await usage.getAttribute("data-free"), String(free));
  assert.equal(
    await usage.locator(".bar").getAttribute("aria-label"),
    `${want.used} used, ${want.quarantined} quarantined, ${free} free of ${want.total}`,
  );
  assert.equal(
    await usage.locator(".usage-text").textContent(),
    `${want.used} / ${want.total} used` +
      (want.quarantined ? `, ${want.quarantined} quarantined` : ""),
  );
  const bar = await usage.locator(".bar").boundingBox();
  const used = await usage.locator(".part.used").boundingBox();
  const held = await usage.locator(".part.quarantined").boundingBox();
  assert.ok(bar && used && held);
  assert.ok(Math.abs(used.width - (bar.width * want.used) / want.total) < 1, "used width");
  assert.ok(
    Math.abs(held.width - (bar.width * want.quarantined) / want.total) < 1,
    "quarantined width",
  );
}

const XSS_NAME = "<img src=x onerror=window.__xss=1>";
const XSS_DESCRIPTION = `<img src=x onerror="window.__xss=2"><script>window.__xss=3</script>`;
const XSS_POD = `<img src=x onerror=window.__xss=4>`;

Deno.test("console: what a tenant named is shown as text, and the page runs no inline script", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    await api("POST", "tenants", { body: { name: "acme" } });
    // A network name is a DNS label: the API refuses markup there before any page could show it.
    const refused = await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: XSS_NAME, cidr: "10.1.0.0/24" },
      status: 400,
    });
    assert.equal(refused.error.field, "name");
    // Free text a tenant chooses: a network's description, a pod's name.
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "blue", cidr: "10.1.0.0/24", description: XSS_DESCRIPTION },
    });
    await api("PUT", "tenants/acme/networks/blue/ports/p1", {
      token: ACME,
      body: { pod: { namespace: "acme", name: XSS_POD }, interface: "eth0" },
    });

    // A wrong token is refused in the form, and not kept.
    const page = await openConsole(env);
    await page.locator("#login").waitFor({ state: "visible" });
    await page.fill("#token", "not-a-token");
    await page.click("#login button[type=submit]");
    await page.locator("#login-error", { hasText: "Unknown bearer token" }).waitFor();
    assert.equal(await page.locator("#views").isHidden(), true);
    assert.equal(
      await page.evaluate(() => sessionStorage.getItem("knitter-console-token")),
      null,
    );
    await submitToken(page, ACME);
    const csp =
      (await page.request.get(`${env.url}/console/`)).headers()["content-security-policy"];
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /default-src 'none'/);

    assert.equal(
      await page.locator('tr.network[data-network="blue"] td.description').textContent(),
      XSS_DESCRIPTION,
    );
    assert.equal(
      await page.locator('#ports tr.port[data-port="p1"] td.pod').textContent(),
      `acme/${XSS_POD}`,
    );
    assert.deepEqual(await texts(page, "#pod-picker option"), [`acme/${XSS_POD}`]);
    assert.deepEqual(await texts(page, POD_TITLE), [`acme/${XSS_POD}`]);
    assert.deepEqual(await texts(page, TENANT_PICTURE + " .pod-box text.title"), [
      `acme/${XSS_POD}`,
    ]);
    assert.equal(await page.locator("img").count(), 0, "no img element was made");
    assert.equal(await page.locator("#views script").count(), 0, "no script element was made");
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "__xss")), undefined);

    // The policy holds on the page itself: an inline script added to it does not run.
    // (An allowed inline script runs as it is inserted, before append returns.)
    const ran = await page.evaluate(`(() => {
      const script = document.createElement("script");
      script.textContent = "window.__inline = 1";
      document.body.append(script);
      return window.__inline;
    })()`);
    assert.equal(ran, undefined, "an inline script ran");
  });
});

/** The links of the tenant's picture: "kind from->to". */
function pictureLinks(page: Page): Promise<string[]> {
  return page.locator(`${TENANT_PICTURE} line.link`).evaluateAll((els) =>
    els.map((e) =>
      `${e.getAttribute("class")?.split(" ")[1]} ${e.getAttribute("data-from")}->${
        e.getAttribute("data-to")
      }`
    )
  );
}

/** The text of the page's body: what a person could read on it. */
async function bodyText(page: Page): Promise<string> {
  return await page.locator("body").textContent() ?? "";
}

Deno.test("console: a tenant's routers, security groups and whole topology as one picture, live, its own only", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    await api("POST", "tenants", { body: { name: "acme" } });
    await api("POST", "tenants", { body: { name: "globex" } });
    await api("PUT", "nodes/n1", { body: { underlayIp: "192.0.2.1" } });
    await api("POST", "tenants/acme/security-groups", {
      token: ACME,
      body: {
        name: "web",
        description: "the web tier",
        rules: [
          { direction: "ingress", protocol: "tcp", ports: "80", peer: { cidr: "10.0.0.0/8" } },
          { direction: "egress", protocol: "any" },
        ],
      },
    });
    await api("POST", "tenants/acme/security-groups", { token: ACME, body: { name: "db" } });
    // front's ports that name no group are in web: members through the network.
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "front", cidr: "10.1.0.0/24", gateway: "10.1.0.1", securityGroups: ["web"] },
    });
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "back", cidr: "10.2.0.0/24", gateway: "10.2.0.1" },
    });
    // ops is on no router yet: the picture shows it alone until one connects it.
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "ops", cidr: "10.3.0.0/24", gateway: "10.3.0.1" },
    });
    const port = (net: string, id: string, pod: string, ifname: string, extra = {}) =>
      api("PUT", `tenants/acme/networks/${net}/ports/${id}`, {
        body: { node: "n1", pod: { namespace: "acme", name: pod }, interface: ifname, ...extra },
      });
    await port("front", "web-eth0", "web", "eth0");
    await port("back", "web-net1", "web", "net1");
    const db = await port("back", "db-eth0", "db", "eth0", { securityGroups: ["web"] });
    const dbIp = db.address.split("/")[0];
    const core = await api("POST", "tenants/acme/routers", {
      token: ACME,
      body: {
        name: "core",
        networks: ["front", "back"],
        routes: [{ dst: "192.168.0.0/16", via: dbIp }],
        description: "between the tiers",
      },
    });
    // globex's own: none of it may show on acme's page.
    await api("POST", "tenants/globex/security-groups", {
      token: GLOBEX,
      body: { name: "vault", rules: [{ direction: "ingress", protocol: "udp" }] },
    });
    await api("POST", "tenants/globex/networks", {
      token: GLOBEX,
      body: { name: "hidden", cidr: "10.9.0.0/24", gateway: "10.9.0.1" },
    });
    await api("POST", "tenants/globex/routers", {
      token: GLOBEX,
      body: { name: "secret", networks: ["hidden"] },
    });
    await api("PUT", "tenants/globex/networks/hidden/ports/spy-eth0", {
      body: { node: "n1", pod: { namespace: "globex", name: "spy" }, interface: "eth0" },
    });

    const page = await logIn(env, ACME);
    assert.deepEqual(await texts(page, "#views h2"), TENANT_VIEWS);
    assert.deepEqual(await texts(page, "#views nav a"), TENANT_VIEWS);

    // The router: its networks with the gateway it holds on each, its static route.
    assert.deepEqual(await attrs(page, "#routers tr.router", "data-router"), ["core"]);
    const coreRow = '#routers tr.router[data-router="core"]';
    assert.deepEqual(
      await texts(page, `${coreRow} li.router-network`),
      core.networks.map((n: { name: string; cidr: string; gateway: string }) =>
        `${n.name} (${n.cidr}), gateway ${n.gateway}`
      ),
    );
    assert.deepEqual(
      core.networks.map((n: { name: string }) => n.name).sort(),
      ["back", "front"],
    );
    assert.deepEqual(await texts(page, `${coreRow} li.route`), [
      `192.168.0.0/16 via ${dbIp}`,
    ]);
    assert.equal(
      await page.locator(`${coreRow} td.description`).textContent(),
      "between the tiers",
    );

    // The groups: their rules in words, and how many ports each applies to (web: web-eth0 by its
    // network, db-eth0 by its own list; web-net1 is in none).
    assert.deepEqual(await attrs(page, "#security-groups tr.security-group", "data-group"), [
      "db",
      "web",
    ]);
    const group = (name: string) => `#security-groups tr.security-group[data-group="${name}"]`;
    assert.deepEqual(await texts(page, `${group("web")} li.rule`), [
      "ingress tcp 80 from 10.0.0.0/8",
      "egress any to any",
    ]);
    assert.equal(await page.locator(`${group("web")} td.members`).textContent(), "2");
    assert.equal(await page.locator(`${group("db")} td.members`).textContent(), "0");
    assert.equal(
      await page.locator(`${group("db")} td:nth-child(3)`).textContent(),
      "no rules: nothing allowed",
    );

    // The whole picture: pods, their interfaces, the networks, the router, each linked.
    assert.equal(await page.locator("#tenant-picker").count(), 0, "a tenant picks no tenant");
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.pod-box`, "data-pod"), [
      "acme/db",
      "acme/web",
    ]);
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.iface`, "data-interface"), [
      "acme/db/eth0",
      "acme/web/eth0",
      "acme/web/net1",
    ]);
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.net`, "data-network"), [
      "acme/back",
      "acme/front",
      "acme/ops",
    ]);
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.router-box`, "data-router"), [
      "core",
    ]);
    assert.deepEqual(await pictureLinks(page), [
      "pod-link acme/db->acme/db/eth0",
      "pod-link acme/web->acme/web/eth0",
      "pod-link acme/web->acme/web/net1",
      "net-link acme/db/eth0->acme/back",
      "net-link acme/web/eth0->acme/front",
      "net-link acme/web/net1->acme/back",
      "router-link acme/front->core",
      "router-link acme/back->core",
    ]);
    assert.deepEqual(
      await texts(page, `${TENANT_PICTURE} g.iface[data-interface="acme/db/eth0"] text`),
      ["eth0", db.address],
    );
    // Each link starts at its box's right edge and ends at the next box's left edge.
    const ends = await page.locator(`${TENANT_PICTURE} line.router-link`).first().evaluate((l) => [
      l.getAttribute("x1"),
      l.getAttribute("x2"),
    ]);
    const netBox = await page.locator(`${TENANT_PICTURE} g.net rect`).first().evaluate((r) => [
      Number(r.getAttribute("x")) + Number(r.getAttribute("width")),
    ]);
    const routerBox = await page.locator(`${TENANT_PICTURE} g.router-box rect`).evaluate((r) =>
      r.getAttribute("x")
    );
    assert.deepEqual(ends, [String(netBox[0]), routerBox]);
    const saveTo = Deno.env.get("KNITTER_TEST_SCREENSHOTS");
    if (saveTo) {
      const shot = await page.locator(TENANT_PICTURE).screenshot();
      await Deno.writeFile(`${saveTo}/tenant_topology.png`, shot);
      await Deno.writeFile(`${saveTo}/routers.png`, await page.locator("#routers").screenshot());
    }
    for (const word of ["globex", "vault", "secret", "hidden", "spy"]) {
      assert.ok(!(await bodyText(page)).includes(word), `the page shows "${word}" of globex`);
    }

    // Live, without a reload: a new router, a group's new rule, a new member, a router deleted.
    await page.evaluate(() => Object.assign(globalThis, { consoleMarker: "no reload" }));
    await api("POST", "tenants/acme/routers", {
      token: ACME,
      body: { name: "edge", networks: ["ops"] },
    });
    await page.locator('#routers tr.router[data-router="edge"]').waitFor();
    await page.locator(`${TENANT_PICTURE} g.router-box[data-router="edge"]`).waitFor();
    assert.ok((await pictureLinks(page)).includes("router-link acme/ops->edge"));
    await api("PUT", "tenants/acme/security-groups/db", {
      token: ACME,
      body: {
        rules: [{ direction: "ingress", protocol: "tcp", ports: "5432", peer: { group: "web" } }],
      },
    });
    await page.locator(`${group("db")} li.rule`, { hasText: "ingress tcp 5432 from group web" })
      .waitFor();
    await port("front", "web2-eth0", "web2", "eth0");
    await page.locator(`${group("web")} td.members`, { hasText: "3" }).waitFor();
    await page.locator(`${TENANT_PICTURE} g.pod-box[data-pod="acme/web2"]`).waitFor();
    await api("DELETE", "tenants/acme/routers/core", { token: ACME });
    await page.locator('#routers tr.router[data-router="core"]').waitFor({ state: "detached" });
    await page.locator(`${TENANT_PICTURE} g.router-box[data-router="core"]`).waitFor({
      state: "detached",
    });
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.router-box`, "data-router"), ["edge"]);
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "consoleMarker")), "no reload");
    assert.ok(!(await bodyText(page)).includes("globex"));

    // globex's token: its own router, group and picture, nothing of acme's.
    await page.click("#logout");
    await submitToken(page, GLOBEX);
    assert.deepEqual(await attrs(page, "#routers tr.router", "data-router"), ["secret"]);
    assert.deepEqual(await attrs(page, "#security-groups tr.security-group", "data-group"), [
      "vault",
    ]);
    assert.deepEqual(await texts(page, "#security-groups li.rule"), ["ingress udp from any"]);
    assert.deepEqual(await attrs(page, `${TENANT_PICTURE} g.pod-box`, "data-pod"), ["globex/spy"]);
    assert.ok(!(await bodyText(page)).includes("acme/"), "globex's page shows acme's");

    // An admin picks the tenant whose picture it sees, and sees every tenant's routers.
    await page.click("#logout");
    await submitToken(page, ADMIN);
    assert.deepEqual(await attrs(page, "#routers tr.router", "data-tenant"), ["acme", "globex"]);
    assert.deepEqual(await texts(page, "#tenant-picker option"), ["acme", "admin", "globex"]);
    await page.selectOption("#tenant-picker", "globex");
    await page.locator(`${TENANT_PICTURE} g.router-box[data-router="secret"]`).waitFor();
    assert.deepEqual(await pictureLinks(page), [
      "pod-link globex/spy->globex/spy/eth0",
      "net-link globex/spy/eth0->globex/hidden",
      "router-link globex/hidden->secret",
    ]);
  });
});

Deno.test("console: an admin sees clusters and nodes with each agent's health, live; a tenant sees none", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    await api("POST", "tenants", { body: { name: "acme" } });
    await api("POST", "clusters", {
      body: { name: "west", description: "the west site", tenants: ["acme"], physnets: ["*"] },
    });
    await api("PUT", "nodes/n1", { body: { underlayIp: "192.0.2.1", labels: { zone: "a" } } });
    const west = await api("PUT", "nodes/n2@west", { body: { underlayIp: "192.0.2.2" } });
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "blue", cidr: "10.1.0.0/24" },
    });
    const p1 = await api("PUT", "tenants/acme/networks/blue/ports/p1", {
      body: { node: "n1", pod: { namespace: "acme", name: "a" }, interface: "eth0" },
    });
    // n2's agent leaves p1 out of its flows: another of its ports claims p1's MAC.
    const item = {
      networkId: p1.networkId,
      tenant: "acme",
      id: p1.id,
      field: "mac",
      value: p1.mac,
      reason: "remote",
    };
    const kept = await api("PUT", "nodes/n2@west/conflicts", { body: { items: [item] } });
    assert.equal(kept.items.length, 1);

    const page = await logIn(env, ADMIN);
    assert.deepEqual(await texts(page, "#views h2"), [
      ...TENANT_VIEWS.slice(0, 5),
      "Clusters and nodes",
      ...TENANT_VIEWS.slice(5),
    ]);
    // The default cluster is listed beside the registered one.
    assert.deepEqual(await attrs(page, "#clusters tr.cluster", "data-cluster"), [
      "default",
      "west",
    ]);
    assert.deepEqual(await texts(page, '#clusters tr.cluster[data-cluster="west"] td'), [
      "west",
      "acme",
      "none",
      "*",
      "in use",
    ]);
    assert.deepEqual(await attrs(page, "#clusters tr.cluster-node", "data-node"), [
      "n1",
      "n2@west",
    ]);
    const nodeRow = (name: string) => `#clusters tr.cluster-node[data-node="${name}"]`;
    assert.deepEqual(await texts(page, `${nodeRow("n2@west")} td`), [
      "n2@west",
      "west",
      "192.0.2.2",
      west.registeredAt,
      west.updatedAt,
      "1 port left out of its flows",
    ]);
    assert.equal(
      await page.locator(`${nodeRow("n1")} .health`).getAttribute("data-conflicts"),
      "0",
    );
    assert.equal(await page.locator(`${nodeRow("n1")} td:nth-child(2)`).textContent(), "default");

    // Live: a node registers, another refreshes its record, a report is cleared.
    await page.evaluate(() => Object.assign(globalThis, { consoleMarker: "no reload" }));
    await api("PUT", "nodes/n3", { body: { underlayIp: "192.0.2.3" } });
    await page.locator(nodeRow("n3")).waitFor();
    const again = await api("PUT", "nodes/n2@west", { body: { underlayIp: "192.0.2.22" } });
    assert.notEqual(again.updatedAt, west.updatedAt);
    await page.locator(`${nodeRow("n2@west")} td.last-refresh`, { hasText: again.updatedAt })
      .waitFor();
    assert.equal(await page.locator(`${nodeRow("n2@west")} td.addr`).textContent(), "192.0.2.22");
    await api("PUT", "nodes/n2@west/conflicts", { body: { items: [] } });
    await page.locator(`${nodeRow("n2@west")} .health[data-conflicts="0"]`).waitFor();
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "consoleMarker")), "no reload");

    // A tenant's page has no clusters view and asks for none: no underlay, no cluster, no refusal.
    await page.click("#logout");
    const asked: string[] = [];
    page.on("response", (r) => asked.push(`${r.status()} ${new URL(r.url()).pathname}`));
    await submitToken(page, ACME);
    assert.deepEqual(await texts(page, "#views h2"), TENANT_VIEWS);
    assert.equal(await page.locator("#clusters").count(), 0);
    const body = await bodyText(page);
    for (const word of ["192.0.2", "west", "n2", "n3"]) {
      assert.ok(!body.includes(word), `a tenant's page shows "${word}"`);
    }
    assert.deepEqual(await texts(page, "#ports .node h3"), ["Node n1 (1)"]);
    assert.deepEqual(asked.filter((a) => !a.startsWith("200 ")), [], "a request was refused");
    assert.ok(!asked.some((a) => a.includes("/clusters") || a.includes("/conflicts")));
  });
});

Deno.test("console: a trace between two ports started from the page, shown step by step; a tenant picks its own ports only; no metrics without Prometheus", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    for (const name of ["acme", "globex"]) await api("POST", "tenants", { body: { name } });
    await api("PUT", "nodes/n1", { body: { underlayIp: "192.0.2.1" } });
    await api("PUT", "nodes/n2", { body: { underlayIp: "192.0.2.2" } });
    for (
      const [tenant, token, name, cidr] of [
        ["acme", ACME, "control", "10.10.0.0/24"],
        ["acme", ACME, "data", "10.20.0.0/24"],
        ["globex", GLOBEX, "secret", "10.10.0.0/24"],
      ]
    ) {
      await api("POST", `tenants/${tenant}/networks`, { token, body: { name, cidr } });
    }
    const bind = (tenant: string, net: string, id: string, node: string) =>
      api("PUT", `tenants/${tenant}/networks/${net}/ports/${id}`, {
        body: { node, pod: { namespace: tenant, name: id }, interface: "eth0" },
      });
    const edge = await bind("acme", "control", "edge", "n1");
    const core = await bind("acme", "control", "core", "n2");
    const store = await bind("acme", "data", "store", "n2");
    await bind("globex", "secret", "vault", "n1");

    const page = await logIn(env, ACME);
    // Only acme's ports to pick from, by tenant/network/port with address and node.
    assert.deepEqual(await texts(page, "#trace-from option"), [
      `pod acme/core eth0 on acme/control (${core.ip}, node n2)`,
      `pod acme/edge eth0 on acme/control (${edge.ip}, node n1)`,
      `pod acme/store eth0 on acme/data (${store.ip}, node n2)`,
    ]);
    assert.doesNotMatch(await bodyText(page), /globex|vault/);

    await page.selectOption("#trace-from", "acme/control/edge");
    await page.selectOption("#trace-to", "acme/control/core");
    await page.selectOption("#trace-proto", "tcp");
    await page.fill("#trace-dport", "443");
    await page.click("#trace-form button[type=submit]");
    await page.locator("#trace-result").waitFor();
    assert.deepEqual(await texts(page, "#trace-result .trace-verdict.delivered"), [
      "delivered on n2 to acme/core/eth0",
    ]);
    assert.deepEqual(await attrs(page, "#trace-result .trace-hop", "data-node"), ["n1", "n2"]);
    const [first] = await texts(page, "#trace-result .trace-hop h3");
    assert.match(first, /^1\. node n1: in from /);
    // Each node's steps, table by table, in words; the tunnel named by node, not address.
    for (const node of ["n1", "n2"]) {
      const steps = await texts(page, `#trace-result .trace-hop[data-node=${node}] .trace-step`);
      assert.ok(steps.length >= 2, `${node}: ${steps.join(" | ")}`);
      for (const s of steps) assert.match(s, /^table \d+ \S+ priority \d+ \S+: ./);
    }
    assert.match(
      (await texts(page, "#trace-result .trace-hop[data-node=n1] .trace-outcome"))[0],
      /through the tunnel to node n2/,
    );
    assert.doesNotMatch(await bodyText(page), /192\.0\.2\./, "no underlay address for a tenant");

    const saveTo = Deno.env.get("KNITTER_TEST_SCREENSHOTS");
    if (saveTo) {
      await Deno.writeFile(`${saveTo}/trace.png`, await page.locator("#trace").screenshot());
    }
    // Another network on no router: not delivered, and the page says so.
    await page.selectOption("#trace-to", "acme/data/store");
    await page.selectOption("#trace-proto", "icmp");
    await page.click("#trace-form button[type=submit]");
    await page.locator("#trace-result .trace-verdict.not-delivered").waitFor();

    // No Prometheus configured: the metrics view says so.
    assert.match(
      (await texts(page, "#metrics-off"))[0],
      /^Metrics are not configured\. .*"prometheusUrl"/,
    );

    const theirs = await logIn(env, GLOBEX);
    assert.deepEqual(await texts(theirs, "#trace-from option"), [
      "pod globex/vault eth0 on globex/secret (10.10.0.1, node n1)",
    ]);
  });
});

Deno.test("console: a tenant sees its own floating addresses (pool, port or claim, node), following a move live; an admin sees every tenant's and the pools with their usage", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    for (const name of ["acme", "globex"]) await api("POST", "tenants", { body: { name } });
    await api("PUT", "nodes/n1", { body: { underlayIp: "192.0.2.1" } });
    await api("PUT", "nodes/n2", { body: { underlayIp: "192.0.2.2" } });
    await api("POST", "floating-pools", { body: { name: "ext", cidrs: ["203.0.113.0/29"] } });
    await api("POST", "floating-pools", { body: { name: "lan", cidrs: ["192.0.2.200/30"] } });
    await api("POST", "tenants/acme/networks", {
      token: ACME,
      body: { name: "blue", cidr: "10.1.0.0/24" },
    });
    await api("POST", "tenants/globex/networks", {
      token: GLOBEX,
      body: { name: "secret", cidr: "10.1.0.0/24" },
    });
    const port = (tenant: string, net: string, id: string, node: string) =>
      api("PUT", `tenants/${tenant}/networks/${net}/ports/${id}`, {
        body: { node, pod: { namespace: tenant, name: id }, interface: "eth0" },
      });
    await port("acme", "blue", "web", "n1");
    await port("globex", "secret", "spy", "n1");
    await api("POST", "tenants/acme/networks/blue/claims", { token: ACME, body: { name: "vm1" } });
    const take = async (tenant: string, token: string, pool: string) =>
      (await api("POST", `tenants/${tenant}/floating-ips`, { token, body: { pool } })).address;
    const bind = (tenant: string, token: string, address: string, body: unknown) =>
      api("POST", `tenants/${tenant}/floating-ips/${address}/bind`, { token, body, status: 200 });
    const web = await take("acme", ACME, "ext");
    const held = await take("acme", ACME, "ext");
    const theirs = await take("globex", GLOBEX, "ext");
    const released = await take("acme", ACME, "ext");
    await api("DELETE", `tenants/acme/floating-ips/${released}`, { token: ACME });
    const vm = await take("acme", ACME, "lan");
    await bind("acme", ACME, web, { network: "blue", port: "web" });
    await bind("acme", ACME, vm, { network: "blue", claim: "vm1" });
    await bind("globex", GLOBEX, theirs, { network: "secret", port: "spy" });

    const page = await logIn(env, ACME);
    const row = (address: string) => `#floating tr.floating-ip[data-address="${address}"]`;
    assert.deepEqual(
      await attrs(page, "#floating tr.floating-ip", "data-address"),
      [
        vm,
        web,
        held,
      ].sort((a, b) => a.localeCompare(b, "en", { numeric: true })),
    );
    assert.deepEqual(await texts(page, `${row(web)} td`), [
      "acme",
      web,
      "ext",
      "port blue/web",
      "n1",
    ]);
    assert.deepEqual(await texts(page, `${row(held)} td`), [
      "acme",
      held,
      "ext",
      "unbound",
      "none",
    ]);
    assert.deepEqual(await texts(page, `${row(vm)} td`), [
      "acme",
      vm,
      "lan",
      "claim blue/vm1",
      "none",
    ]);
    // A tenant sees no pools' usage (it counts other tenants') and nothing of globex's.
    assert.equal(await page.locator("#floating tr.floating-pool").count(), 0);
    const body = await bodyText(page);
    for (const word of ["globex", "spy", theirs, released]) {
      assert.ok(!body.includes(word), `the tenant's page shows "${word}"`);
    }

    // The pod moves to n2 (deleted, made again with the same port ID): the row follows, live.
    await page.evaluate(() => Object.assign(globalThis, { consoleMarker: "no reload" }));
    await api("DELETE", "tenants/acme/networks/blue/ports/web");
    await port("acme", "blue", "web", "n2");
    await page.locator(`${row(web)} td.node`, { hasText: "n2" }).waitFor();
    assert.equal(await page.evaluate(() => Reflect.get(globalThis, "consoleMarker")), "no reload");

    // An admin: every tenant's addresses, and the pools with what is held, quarantined and free.
    await page.click("#logout");
    await submitToken(page, ADMIN);
    assert.deepEqual(await texts(page, `${row(theirs)} td`), [
      "globex",
      theirs,
      "ext",
      "port secret/spy",
      "n1",
    ]);
    assert.deepEqual(await attrs(page, "#floating tr.floating-pool", "data-pool"), ["ext", "lan"]);
    const usage = (pool: string) => `#floating tr.floating-pool[data-pool="${pool}"] .usage`;
    // ext: a /29 less its two ends; web, held and globex's held, the released one in quarantine.
    assert.deepEqual(await usageOf(page, usage("ext")), ["6", "3", "1", "2"]);
    assert.deepEqual(await usageOf(page, usage("lan")), ["2", "1", "0", "1"]);
    assert.equal(
      await page.locator(`${usage("ext")} .bar`).getAttribute("aria-label"),
      "3 used, 1 quarantined, 2 free of 6",
    );
  });
});

/** A usage bar's total, used, quarantined and free, as it carries them. */
async function usageOf(page: Page, selector: string): Promise<(string | null)[]> {
  const el = page.locator(selector);
  return await Promise.all(
    ["total", "used", "quarantined", "free"].map((k) => el.getAttribute(`data-${k}`)),
  );
}

Deno.test("console: networks advertised to the fabric are tagged, with the router that advertises them; so is the router", async () => {
  await withConsole(async (env) => {
    const { api } = env;
    await api("POST", "tenants", { body: { name: "acme" } });
    for (const [name, cidr] of [["blue", "10.1.0.0/24"], ["green", "10.2.0.0/24"]]) {
      await api("POST", "tenants/acme/networks", {
        token: ACME,
        body: { name, cidr, gateway: cidr.replace("0/24", "1") },
      });
    }
    await api("PATCH", "tenants/acme/networks/blue", { body: { advertise: true } });
    await api("POST", "tenants/acme/routers", {
      body: { name: "edge", networks: ["green"], advertise: true },
    });
    const page = await logIn(env, ACME);
    const tags = (network: string) =>
      texts(page, `#networks tr.network[data-network="${network}"] .tag`);
    assert.deepEqual(await tags("blue"), ["advertised"]);
    assert.deepEqual(await tags("green"), ["advertised by edge"]);
    assert.deepEqual(await texts(page, '#routers tr.router[data-router="edge"] .tag'), [
      "advertised",
    ]);
    // The router deleted: green is withdrawn, and the page follows.
    await api("DELETE", "tenants/acme/routers/edge", { token: ACME });
    await page.locator('#routers tr.router[data-router="edge"]').waitFor({ state: "detached" });
    await page.locator('#networks tr.network[data-network="green"] .tag').waitFor({
      state: "detached",
    });
  });
});
