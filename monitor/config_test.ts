import assert from "node:assert/strict";
import { DaemonConfigError } from "@knitter/common/daemon_config";
import { loadMonitorConfig } from "./config.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("monitor config: environment and flags fill the file's gaps, defaults the rest", async () => {
  const { config } = await loadMonitorConfig(
    ["--kubeconfig", "/etc/kube/monitor.conf"],
    env({
      KNITTER_MONITOR_MANAGER_URL: "http://manager:9527",
      KNITTER_MONITOR_MANAGER_TOKEN: "an-admin-token-of-16+",
    }),
  );
  assert.equal(config.kubernetes.kubeconfig, "/etc/kube/monitor.conf");
  assert.equal(config.manager.url, "http://manager:9527");
  assert.equal(config.reclaimGraceSeconds, 30);
  assert.deepEqual(config.publicNamespaces, ["knitter-system"]);
});

Deno.test("monitor config: a missing manager and a bad flag say what is wrong", async () => {
  await assert.rejects(
    () => loadMonitorConfig([], env({})),
    (e) => e instanceof DaemonConfigError && /at "manager"/.test(e.message),
  );
  await assert.rejects(
    () => loadMonitorConfig(["--nope"], env({})),
    (e) => e instanceof DaemonConfigError && /Usage: deno task monitor/.test(e.message),
  );
  assert.equal((await loadMonitorConfig(["--help"], env({}))).help, true);
});

Deno.test("monitor config: a watch deadline not longer than the watch timeout is refused", async () => {
  const file = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        manager: { url: "http://manager:9527", token: "an-admin-token-of-16+" },
        watchTimeoutSeconds: 60,
        watchDeadlineSeconds: 60,
      }),
    );
    await assert.rejects(
      () => loadMonitorConfig(["--config", file], env({})),
      (e) =>
        e instanceof DaemonConfigError &&
        /at "watchDeadlineSeconds": must be longer than watchTimeoutSeconds/.test(e.message),
    );
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("monitor config: a feed deadline not longer than its wait, and a public default network outside publicNamespaces, are refused", async () => {
  const file = await Deno.makeTempFile({ suffix: ".json" });
  const manager = { url: "http://manager:9527", token: "an-admin-token-of-16+" };
  const load = async (more: Record<string, unknown>) => {
    await Deno.writeTextFile(file, JSON.stringify({ manager, ...more }));
    return loadMonitorConfig(["--config", file], env({}));
  };
  try {
    await assert.rejects(
      () => load({ feedWaitSeconds: 30, feedDeadlineSeconds: 30 }),
      /at "feedDeadlineSeconds": must be longer than feedWaitSeconds/,
    );
    const spec = { type: "vxlan", cidr: "10.244.0.0/16", public: true };
    await assert.rejects(
      () => load({ defaultNetwork: { namespace: "acme", name: "pods", spec } }),
      /at "defaultNetwork.namespace": a public default network must be in one of publicNamespaces/,
    );
    const { config } = await load({ defaultNetwork: { name: "pods", spec } });
    assert.equal(config.defaultNetwork?.namespace, "knitter-system");
    assert.equal(config.feedWaitSeconds, 25);
    assert.equal(config.feedDeadlineSeconds, 40);
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("monitor config: a missing or bad value says where it is given", async () => {
  await assert.rejects(
    () => loadMonitorConfig([], env({ KNITTER_MONITOR_MANAGER_URL: "http://manager:9527" })),
    /at "manager.token": .*; give it in a configuration file \(--config\) or by KNITTER_MONITOR_MANAGER_TOKEN$/,
  );
  await assert.rejects(
    () =>
      loadMonitorConfig(
        [],
        env({
          KNITTER_MONITOR_MANAGER_URL: "manager",
          KNITTER_MONITOR_MANAGER_TOKEN: "x".repeat(16),
        }),
      ),
    /at "manager.url": .*\(from KNITTER_MONITOR_MANAGER_URL\); correct it$/,
  );
});
