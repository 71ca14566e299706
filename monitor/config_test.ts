import assert from "node:assert/strict";
import { loadMonitorConfig, MonitorConfigError } from "./config.ts";

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
    (e) => e instanceof MonitorConfigError && /at "manager"/.test(e.message),
  );
  await assert.rejects(
    () => loadMonitorConfig(["--nope"], env({})),
    (e) => e instanceof MonitorConfigError && /Usage: deno task monitor/.test(e.message),
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
        e instanceof MonitorConfigError &&
        /at "watchDeadlineSeconds": must be longer than watchTimeoutSeconds/.test(e.message),
    );
  } finally {
    await Deno.remove(file);
  }
});
