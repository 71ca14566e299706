import assert from "node:assert/strict";
import { ManagerClient } from "./manager_client.ts";

/** A manager stand-in that answers an empty port list and records the URLs asked. */
function portsServer(): { url: string; asked: string[]; [Symbol.asyncDispose](): Promise<void> } {
  const asked: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const u = new URL(req.url);
    asked.push(u.pathname + u.search);
    return Response.json({ items: [] });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    asked,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("ManagerClient.listPorts() asks the manager to filter: by node, pod and tenant", async () => {
  await using server = portsServer();
  const client = new ManagerClient(server.url, "t");
  try {
    await client.listPorts();
    await client.listPorts({ node: "n1" });
    await client.listPorts({ pod: "acme/web-0", tenant: "acme" });
  } finally {
    client.close();
  }
  assert.deepEqual(server.asked, [
    "/api/v1/ports",
    "/api/v1/ports?node=n1",
    "/api/v1/ports?pod=acme%2Fweb-0&tenant=acme",
  ]);
});
