/** The speaker's reading of BIRD: `birdc show protocols` as BIRD 2.0.12 prints it. */
import assert from "node:assert/strict";
import { parseProtocols } from "./bgp_speaker.ts";

const SHOWN = `BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     23:16:30.973  
knitter4   Static     master4    up     23:16:30.973  
knitter6   Static     master6    up     23:16:30.973  
peer_192_0_2_1 BGP     ---        up     23:16:34.872  Established   
peer_192_0_2_2 BGP     ---        start  23:16:30.973  Active        Socket: Connection refused
other      BGP        ---        up     23:16:34.872  Established   
`;

Deno.test("bgp speaker: the sessions of the configured peers, by name and address, established or not", () => {
  assert.deepEqual(parseProtocols(SHOWN, ["192.0.2.1", "192.0.2.2"]), [
    {
      name: "peer_192_0_2_1",
      peer: "192.0.2.1",
      state: "up",
      info: "Established",
      established: true,
    },
    {
      name: "peer_192_0_2_2",
      peer: "192.0.2.2",
      state: "start",
      info: "Active Socket: Connection refused",
      established: false,
    },
  ]);
  assert.deepEqual(parseProtocols("", ["192.0.2.1"]), []);
});
