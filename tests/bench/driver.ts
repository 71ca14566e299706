/**
 * Runs a batch of commands the way a container runtime execs CNI plugins, from inside the netns it
 * is started in (`ip netns exec NODE deno run -A tests/bench/driver.ts`): the simulated node's own
 * netns, as kubelet runs on the host. Each command gets only the environment given (like a
 * runtime's `env -i`) and its stdin; wall times are taken around each exec.
 *
 * stdin: a {@link DriverRequest} as JSON; stdout: a {@link DriverResult} as JSON.
 */

export interface DriverJob {
  argv: string[];
  env: Record<string, string>;
  stdin?: string;
}

export interface DriverRequest {
  /** One after the other, or all at once. */
  mode: "sequential" | "concurrent";
  jobs: DriverJob[];
}

export interface DriverRun {
  code: number;
  stdout: string;
  stderr: string;
  /** Epoch milliseconds (performance.timeOrigin + performance.now()), comparable across processes. */
  start: number;
  end: number;
  ms: number;
}

export interface DriverResult {
  /** From the first spawn to the last exit. */
  wallMs: number;
  runs: DriverRun[];
}

const now = () => performance.timeOrigin + performance.now();
const decoder = new TextDecoder();

async function exec(job: DriverJob): Promise<DriverRun> {
  const start = now();
  const child = new Deno.Command(job.argv[0], {
    args: job.argv.slice(1),
    env: job.env,
    clearEnv: true,
    stdin: job.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (job.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(job.stdin));
    await w.close();
  }
  const out = await child.output();
  const end = now();
  return {
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
    start,
    end,
    ms: end - start,
  };
}

export async function drive(req: DriverRequest): Promise<DriverResult> {
  const t0 = now();
  let runs: DriverRun[];
  if (req.mode === "concurrent") {
    runs = await Promise.all(req.jobs.map(exec));
  } else {
    runs = [];
    for (const job of req.jobs) runs.push(await exec(job));
  }
  return { wallMs: now() - t0, runs };
}

if (import.meta.main) {
  const req: DriverRequest = JSON.parse(await new Response(Deno.stdin.readable).text());
  console.log(JSON.stringify(await drive(req)));
}
