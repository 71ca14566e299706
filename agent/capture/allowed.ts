/**
 * Who may capture what, and where it is on this node: the manager's word with the caller's own
 * token (a port it shows that token, bound to this node and attached here by this agent; a mirror
 * it shows that token), for capture.ts and mirror_capture.ts.
 */
import type { Logger, ManagerClient, Port } from "@knitter/common";
import { ManagerError } from "@knitter/common";
import { portKey } from "../dataplane/port_key.ts";
import type { AgentState } from "../state.ts";

export interface CaptureDeps {
  nodeName: string;
  state: AgentState;
  /** A manager client that calls with `token` (the caller's), closed after use. */
  managerAs(token: string): ManagerClient;
  log: Logger;
}

/** A capture refused for what the caller asked: `status` says how (400, 403). */
export class CaptureRefused extends Error {
  constructor(readonly status: 400 | 403, message: string) {
    super(message);
    this.name = "CaptureRefused";
  }
}

/** Where tcpdump listens, and what it keeps there before the caller's filter. */
export interface CaptureTarget {
  /** The request's thing, for the log: "tenant/network/port" or "mirror tenant/name". */
  what: string;
  iface: string;
  /** tcpdump's -Q. */
  queue: "in" | "out" | "inout";
  /** A filter of the target's own, and-ed with the caller's. */
  filter?: string;
}

/** A port by its tenant, network and ID (or name), as a request names it. */
export interface PortRef {
  tenant: string;
  network: string;
  port: string;
}

/** The port as the manager shows it to the caller's token, bound to this node; else refused. */
export async function allowedPort(deps: CaptureDeps, token: string, req: PortRef): Promise<Port> {
  const name = `${req.tenant}/${req.network}/${req.port}`;
  const port = await shownToCaller<Port>(
    deps,
    token,
    `/api/v1/tenants/${enc(req.tenant)}/networks/${enc(req.network)}/ports/${enc(req.port)}`,
    { kind: "port", name },
  );
  if (port.node !== deps.nodeName) {
    throw new CaptureRefused(
      403,
      `Capture of port ${name} refused: it is bound to ${
        port.node ? `node ${port.node}` : "no node"
      }, not to ${deps.nodeName}; run knitctl capture against that node's agent`,
    );
  }
  return port;
}

/**
 * What the manager answers the caller's token at `path` (a port, a mirror); what it does not show
 * that token is refused: the manager decides whose things a caller may capture.
 */
export async function shownToCaller<T>(
  deps: CaptureDeps,
  token: string,
  path: string,
  what: { kind: string; name: string },
): Promise<T> {
  const manager = deps.managerAs(token);
  try {
    return await manager.request<T>("GET", path);
  } catch (err) {
    if (err instanceof ManagerError) {
      throw new CaptureRefused(
        403,
        `Capture of ${what.kind} ${what.name} refused: the manager does not show this ${what.kind} to your token (${err.status} ${err.message}); use the token of its tenant, or an admin token`,
      );
    }
    throw err;
  } finally {
    manager.close();
  }
}

/** The host veth of the port's interface on this node, or why there is none to capture. */
export function hostInterface(deps: CaptureDeps, req: PortRef, port: Port): string {
  const name = `${req.tenant}/${req.network}/${req.port}`;
  // The port the manager showed this token, by its owner: on a public network a tenant's port of
  // an ID is never another tenant's port of that ID, whatever path the request named.
  const key = portKey(port);
  const found = [...deps.state.attachmentsView()].flatMap((a) => a.interfaces).find((i) =>
    i.port !== undefined && portKey(i.port) === key
  );
  if (!found) {
    throw new CaptureRefused(
      403,
      `Capture of port ${name} refused: no interface of this node's agent holds it (the manager binds it to ${port.node}, the pod may be gone or not made yet)`,
    );
  }
  if (found.hostIfName === "") {
    throw new CaptureRefused(
      400,
      `Cannot capture port ${name}: its network has an external data plane (another plugin made its interface; knitter has no veth of it on the node); capture inside the pod instead`,
    );
  }
  return found.hostIfName;
}

export const enc = encodeURIComponent;
