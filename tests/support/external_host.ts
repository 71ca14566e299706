/**
 * An external host for egress and hostPort tests: a netns of the test's own on a stack's underlay
 * (the switch netns `cleanup.name("ul")`), with no route to any pod CIDR: what reaches it from a
 * pod went through a node, and what it reaches of a pod, through a node's address.
 */
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";

/** Its address on the underlay (the stack's nodes are 192.0.2.1, .2, ...). */
export const EXTERNAL = "192.0.2.250";

/** Makes the external host; answers its netns name. */
export async function externalHost(cleanup: Cleanup): Promise<string> {
  const ext = cleanup.name("ext");
  cleanup.netns(ext);
  await run(["ip", "netns", "add", ext]);
  await run(["ip", "-n", cleanup.name("ul"), "-batch", "-"], {
    stdin: `link add ext0 type veth peer name eth0 netns ${ext}\nlink set ext0 master br0 up\n`,
  });
  await run(["ip", "-n", ext, "-batch", "-"], {
    stdin: `addr add ${EXTERNAL}/24 dev eth0\nlink set eth0 up\nlink set lo up\n`,
  });
  // A host on a wire sends whole checksums; a veth would pass them half done (offload), and the
  // node's Open vSwitch (userspace) reads frames as they are, so its kernel would see bad sums.
  await run(["ip", "netns", "exec", ext, "ethtool", "-K", "eth0", "tx", "off"]);
  return ext;
}
