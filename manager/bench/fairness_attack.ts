/**
 * One tenant's attack on the manager, run in a Worker so that its own work does not delay the
 * victim's clock in the bench's main thread (fairness_bench.ts). Started with an `Attack` message;
 * `"stop"` ends it, and it answers with the statuses it got.
 */

export type AttackKind = "nested" | "lists" | "flood" | "connections";

export interface Attack {
  kind: AttackKind;
  url: string;
  token: string;
  tenant: string;
  network: string;
}

/** What each attack does, by how many clients. */
export const ATTACKS: Record<AttackKind, { clients: number; what: string }> = {
  nested: { clients: 8, what: "8 clients POST 1 MiB bodies of nested arrays" },
  lists: { clients: 32, what: "32 clients list a network of 1,000 ports, in parallel" },
  flood: { clients: 64, what: "64 clients send small GETs back to back" },
  connections: {
    clients: 16,
    what: "1,000 keep-alive connections held open, 16 clients on a new connection per request",
  },
};

const HELD_CONNECTIONS = 1000;

const statuses = new Map<string, number>();
const count = (s: string) => statuses.set(s, (statuses.get(s) ?? 0) + 1);
let stopping = false;

/** `depth` nested arrays inside a network body: 1 MiB in all. */
function nestedBody(): string {
  const depth = (1 << 20) / 2 - 64;
  return `{"name":"x","cidr":"10.9.0.0/24","labels":${"[".repeat(depth)}${"]".repeat(depth)}}`;
}

async function loop(send: () => Promise<Response>): Promise<void> {
  while (!stopping) {
    try {
      const r = await send();
      await r.body?.cancel();
      count(String(r.status));
    } catch (err) {
      count((err as Error).name);
    }
  }
}

/** A connection that sends one request and then stays open, idle, until the attack ends. */
async function holdConnection(a: Attack, host: string, port: number): Promise<Deno.Conn | null> {
  try {
    const c = await Deno.connect({ hostname: host, port });
    await c.write(new TextEncoder().encode(
      `GET /api/v1/tenants/${a.tenant} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.token}\r\n\r\n`,
    ));
    const n = await c.read(new Uint8Array(4096));
    count(n === null ? "closed" : "held");
    return c;
  } catch (err) {
    count((err as Error).name);
    return null;
  }
}

async function run(a: Attack): Promise<Deno.Conn[]> {
  const headers = { authorization: `Bearer ${a.token}`, "content-type": "application/json" };
  const api = `${a.url}/api/v1/tenants/${a.tenant}`;
  const clients = ATTACKS[a.kind].clients;
  const many = (send: () => Promise<Response>) =>
    Promise.all(Array.from({ length: clients }, () => loop(send)));
  switch (a.kind) {
    case "nested": {
      const body = nestedBody();
      await many(() => fetch(`${api}/networks`, { method: "POST", headers, body }));
      return [];
    }
    case "lists":
      await many(() => fetch(`${api}/networks/${a.network}/ports`, { headers }));
      return [];
    case "flood":
      await many(() => fetch(api, { headers }));
      return [];
    case "connections": {
      const { hostname, port } = new URL(a.url);
      const held = await Promise.all(
        Array.from({ length: HELD_CONNECTIONS }, () => holdConnection(a, hostname, Number(port))),
      );
      const fresh = () => Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
      await many(() => {
        const client = fresh();
        return fetch(api, { headers: { ...headers, connection: "close" }, client })
          .finally(() => client.close());
      });
      return held.filter((c): c is Deno.Conn => c !== null);
    }
  }
}

let running: Promise<Deno.Conn[]> | undefined;
/** This module runs as a worker: its global scope talks to the bench. */
const scope = self as unknown as {
  onmessage: (e: MessageEvent<Attack | "stop">) => void;
  postMessage(data: unknown): void;
};

scope.onmessage = async (e) => {
  if (e.data !== "stop") {
    running = run(e.data);
    return;
  }
  stopping = true;
  const held = await running;
  for (const c of held ?? []) {
    try {
      c.close();
    } catch { /* closed by the server */ }
  }
  scope.postMessage(Object.fromEntries(statuses));
};
