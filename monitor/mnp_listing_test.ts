/**
 * A cluster without the MultiNetworkPolicy CRD: the list answers no policies (so the monitor gets
 * ready), warns once, asks again only after the wait, and follows the policies once the CRD is in.
 * Against a Kube double answering 404 as the API server does for an unknown kind.
 */
import assert from "node:assert/strict";
import { createLogger, type Logger } from "@knitter/common";
import { type Kube, KubeError } from "./kube.ts";
import { policyLister } from "./mnp_listing.ts";

Deno.test("no MultiNetworkPolicy CRD: no policies and one warning, asked again after the wait, then followed", async () => {
  let installed = false;
  let asked = 0;
  const kube = {
    listCustom: () => {
      asked++;
      if (!installed) return Promise.reject(new KubeError(404, "Cannot list: 404 not found"));
      return Promise.resolve({ items: [{ metadata: { name: "p", namespace: "acme" } }] });
    },
    countCustom: () => Promise.reject(new KubeError(404, "Cannot count: 404 not found")),
  } as unknown as Kube;
  const warnings: string[] = [];
  const base = createLogger("mnp-listing-test", "error");
  const log: Logger = { ...base, warn: (msg: string) => void warnings.push(msg) };
  const stop = new AbortController();
  const lister = policyLister(kube, { retryMs: 20, signal: stop.signal }, log);
  assert.deepEqual((await lister.list()).items, []);
  assert.deepEqual((await lister.list()).items, []);
  assert.equal(asked, 2);
  assert.equal(warnings.length, 1, "warned once");
  assert.match(warnings[0], /CRD .* is not installed: no policies are applied/);
  assert.equal(await lister.count!(), 0);
  installed = true;
  assert.equal((await lister.list()).items.length, 1);
});
