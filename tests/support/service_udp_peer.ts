/**
 * The UDP ends of a service check (tests/e2e_services_ipv6_test.ts), run inside pods' netns:
 *
 *   service_udp_peer.ts serve PORT NAME SECONDS   a backend on [::]:PORT (IPv4 too): to each
 *                                                  datagram, one of its NAME, the client address it
 *                                                  sees and the datagram as it came; "ready" once
 *                                                  bound
 *   service_udp_peer.ts count ADDR PORT N SIZE    N exchanges one after the other, each from a new
 *                                                  socket (a new source port: a new connection to
 *                                                  conntrack) with SIZE random bytes, checking they
 *                                                  come back intact
 *
 * count prints {names: {NAME: n}, failures, errors, seenAs: {NAME: [client addresses]}}; a reply
 * that does not come within 2 s, or comes changed, is a failure.
 */
import dgram from "node:dgram";
import { Buffer } from "node:buffer";

const [verb, ...args] = Deno.args;
const REPLY_MS = 2000;

if (verb === "serve") {
  const [port, name, seconds] = args;
  setTimeout(() => Deno.exit(0), Number(seconds) * 1000);
  const socket = dgram.createSocket({ type: "udp6" });
  socket.on("message", (msg, from) => {
    // "NAME CLIENT\n" then the datagram's bytes.
    const head = Buffer.from(`${name} ${from.address.replace(/^::ffff:/, "")}\n`);
    socket.send(Buffer.concat([head, msg]), from.port, from.address);
  });
  socket.bind(Number(port), "::", () => console.log("ready"));
} else if (verb === "count") {
  const [addr, port, n, size] = args;
  const names: Record<string, number> = {};
  const seenAs: Record<string, string[]> = {};
  const errors: string[] = [];
  let failures = 0;
  for (let i = 0; i < Number(n); i++) {
    try {
      const sent = crypto.getRandomValues(new Uint8Array(Number(size)));
      const reply = await exchange(addr, Number(port), sent);
      const cut = reply.indexOf(10);
      const [name, client] = new TextDecoder().decode(reply.subarray(0, cut)).split(" ");
      const back = reply.subarray(cut + 1);
      if (back.length !== sent.length || back.some((b, k) => b !== sent[k])) {
        throw new Error(`${name} sent back ${back.length} bytes that differ from the ${size} sent`);
      }
      names[name] = (names[name] ?? 0) + 1;
      seenAs[name] = [...new Set([...(seenAs[name] ?? []), client])];
    } catch (err) {
      failures++;
      if (errors.length < 3) errors.push(String(err));
    }
  }
  console.log(JSON.stringify({ names, failures, errors, seenAs }));
  Deno.exit(0);
} else {
  console.error("usage: service_udp_peer.ts serve|count ...");
  Deno.exit(2);
}

/** Sends `data` to addr:port from a new socket; the first datagram back, or an error after 2 s. */
function exchange(addr: string, port: number, data: Uint8Array): Promise<Uint8Array> {
  const socket = dgram.createSocket({ type: addr.includes(":") ? "udp6" : "udp4" });
  return new Promise<Uint8Array>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no reply within ${REPLY_MS} ms`)), REPLY_MS);
    socket.on("message", (msg) => {
      clearTimeout(timer);
      resolve(new Uint8Array(msg));
    });
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.send(data, port, addr);
  }).finally(() => socket.close());
}
