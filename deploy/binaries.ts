/**
 * What `deno compile` makes for nodes: one self-contained binary per component, with the
 * permissions it runs with baked in (a compiled binary can never exceed them). The CNI plugin is
 * not among them: it is a static C program (plugin/build.ts), built beside them as {@link PLUGIN}.
 */

/** The WebAssembly files `@knitter/wasm` reads at run time (new URL("./build/...", import.meta.url)). */
export const WASM_FILES = ["wasm/build/bitmap.wasm", "wasm/build/flows.wasm"];

export interface Binary {
  /** The file written to the output directory (and its name in the image). */
  name: string;
  /** Entry module, relative to the repository root. */
  entry: string;
  /** Runtime flags baked into the binary: permissions and unstable features. */
  flags: string[];
  /** Files read at run time that no import reaches, relative to the repository root. */
  include: string[];
}

/** The agent's socket, where the CNI plugin looks unless its config says `agentSocket`. */
export const AGENT_SOCKET = "/run/knitter/agent.sock";

/** The CNI plugin's file, named as the CNI "type" it implements: kubelet execs /opt/cni/bin/knitter. */
export const PLUGIN = "knitter";

export const BINARIES: Binary[] = [
  {
    name: "knitter-manager",
    entry: "manager/main.ts",
    // Net for the API (and etcd), read/write for the KV store and its config, env for overrides.
    flags: ["--unstable-kv", "--allow-net", "--allow-read", "--allow-write", "--allow-env"],
    include: WASM_FILES,
  },
  {
    name: "knitter-monitor",
    entry: "monitor/main.ts",
    // The Kubernetes and manager APIs, the in-cluster credentials, and its environment.
    flags: ["--allow-net", "--allow-read", "--allow-env", "--allow-sys"],
    include: [],
  },
  {
    name: "knitter-agent",
    entry: "agent/main.ts",
    // Runs ip, ovs-vsctl, ovs-ofctl and nsenter as root: anything narrower would be pretence.
    flags: ["--unstable-kv", "--allow-all"],
    include: WASM_FILES,
  },
  {
    name: "knitctl",
    entry: "knitctl/main.ts",
    flags: ["--allow-net", "--allow-read", "--allow-write", "--allow-env"],
    include: [],
  },
];

/** The `deno compile` argv of one binary (paths under `root`), writing to `output`. */
export function compileArgs(
  deno: string,
  binary: Binary,
  options: { root: string; output: string; target?: string },
): string[] {
  const target = options.target ? ["--target", options.target] : [];
  const include = binary.include.flatMap((file) => ["--include", `${options.root}/${file}`]);
  return [
    deno,
    "compile",
    "--quiet",
    ...target,
    ...binary.flags,
    ...include,
    "--output",
    options.output,
    `${options.root}/${binary.entry}`,
  ];
}
