import assert from "node:assert/strict";
import { checkConfigFile, resolveSettings } from "./config.ts";

Deno.test('resolveSettings: flags over env over the config file; tenant defaults to "default"', async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/k.json`;
    await Deno.writeTextFile(
      file,
      JSON.stringify({ server: "http://file", token: "ft", tenant: "ft" }),
    );
    const env = (vars: Record<string, string>) => (n: string) => vars[n];
    const fromFile = await resolveSettings({ config: file }, env({}));
    assert.deepEqual([fromFile.server, fromFile.token, fromFile.tenant], [
      "http://file",
      "ft",
      "ft",
    ]);
    const fromEnv = await resolveSettings(
      {},
      env({ KNITCTL_CONFIG: file, KNITCTL_SERVER: "http://env", KNITCTL_TENANT: "et" }),
    );
    assert.deepEqual([fromEnv.server, fromEnv.token, fromEnv.tenant], ["http://env", "ft", "et"]);
    const fromFlags = await resolveSettings(
      { server: "http://flag", tenant: "flt", output: "wide" },
      env({ KNITCTL_CONFIG: file, KNITCTL_SERVER: "http://env" }),
    );
    assert.deepEqual([fromFlags.server, fromFlags.tenant, fromFlags.output], [
      "http://flag",
      "flt",
      "wide",
    ]);
    const none = await resolveSettings({}, env({ HOME: dir }));
    assert.deepEqual([none.server, none.tenant, none.output], [undefined, "default", "table"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkConfigFile: unknown keys and non-strings are named", () => {
  assert.throws(() => checkConfigFile("f", { sever: "x" }), /unknown key "sever"/);
  assert.throws(() => checkConfigFile("f", { token: 5 }), /"token" must be a string/);
  assert.throws(() => checkConfigFile("f", []), /must hold an object/);
});
