/**
 * An external network's delegate (schemas.ts Delegate): the reference plugin and the node's
 * interface the agent makes its pods' interfaces with. The node's interfaces are the admin's: a
 * macvlan on the wrong master, or host-device taking the node's own uplink into a pod, takes the
 * node off its network. So only an admin (or a cluster monitor, which applies the admin's Network
 * resources) sets one, and only at creation (ports made on one master would stay there).
 */
import { ApiError, invalid } from "../errors.ts";
import type { Principal } from "../auth.ts";
import type { NetworkCreateBody } from "../schemas.ts";

/** Refuses a delegate on a network Knitter's own veths carry, or from a tenant's token. */
export function checkDelegate(principal: Principal, body: NetworkCreateBody): void {
  if (body.delegate === undefined) return;
  if (body.dataPlane !== "external") {
    throw invalid(
      "delegate",
      `the ${body.delegate.plugin} plugin makes the interfaces of an external network only: add "dataPlane": "external", or leave delegate out for Knitter's own veths on Open vSwitch`,
    );
  }
  if (principal.scope !== "tenant") return;
  throw new ApiError(
    "forbidden",
    "delegate: the plugin and the node interface a network's pods are given are the admin's (a wrong master or device takes the node off its network); ask the admin to make the network, or leave delegate out and make the interfaces with your own plugin config and the knitter IPAM",
    "delegate",
  );
}
