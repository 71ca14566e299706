/**
 * What `deno compile` makes for nodes: one self-contained binary per component, with the
 * permissions it runs with baked in (a compiled binary can never exceed them).
 */

/** The WebAssembly files `@knitter/wasm` reads at run time (new URL("./build/...", import.meta.url)). */
export const WASM_FILES = ["wasm/build/bitmap.wasm", "wasm/build/flows.wasm"];

/** The plugin's socket; the compiled plugin may reach only this one (see plugin/knitter). */
export const AGENT_SOCKET = "/run/knitter/agent.sock";

/** The variables the plugin reads, exactly as the sh wrapper in plugin/knitter grants them. */
const PLUGIN_ENV = [
  "CNI_COMMAND",
  "CNI_CONTAINERID",
  "CNI_NETNS",
  "CNI_IFNAME",
  "CNI_ARGS",
  "CNI_PATH",
  "KNITTER_AGENT_SOCKET",
  "KNITTER_PLUGIN_DEBUG",
];

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
    // Named as the CNI "type" it implements: kubelet execs /opt/cni/bin/knitter.
    name: "knitter",
    entry: "plugin/main.ts",
    flags: [
      `--allow-env=${PLUGIN_ENV.join(",")}`,
      `--allow-read=${AGENT_SOCKET}`,
      `--allow-write=${AGENT_SOCKET}`,
      `--allow-net=unix:${AGENT_SOCKET}`,
    ],
    include: [],
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
