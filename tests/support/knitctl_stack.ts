/** knitctl against a test's stack: the manifest `--stack DIR` reads, as scripts/stack.ts writes it. */
import { knitctl } from "../../knitctl/test_support.ts";
import type { Stack } from "../../devstack/stack.ts";

/** Writes the stack's manifest and answers knitctl with `--stack` pointing at it. */
export async function knitctlOn(
  stack: Stack,
): Promise<(args: string[]) => ReturnType<typeof knitctl>> {
  await Deno.writeTextFile(
    `${stack.dir}/stack.json`,
    JSON.stringify({
      manager: { url: stack.managerUrl, adminToken: stack.adminToken },
      nodes: stack.nodes.map((n) => ({ name: n.name, agentSocket: n.agentSocket })),
    }),
  );
  return (args: string[]) => knitctl(["--stack", stack.dir, ...args]);
}
