/**
 * The WASM bitmap against its plain TypeScript twin: runs wasm/bench/bitmap_bench.ts under `deno bench`
 * (which keeps the two implementations' benchmark code apart, so that neither is penalised by V8's
 * inlining of the other) and reads its JSON.
 */

export interface BitmapFigures {
  workload: string;
  wasmMicros: number;
  tsMicros: number;
}

interface BenchJson {
  benches: { group: string; name: string; results: { ok?: { avg: number } }[] }[];
}

export async function bitmapFigures(): Promise<BitmapFigures[]> {
  const root = new URL("../../", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bench", "--allow-read", "--json", "wasm/bench/bitmap_bench.ts"],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`deno bench failed: ${new TextDecoder().decode(out.stderr)}`);
  const json: BenchJson = JSON.parse(new TextDecoder().decode(out.stdout));
  const byGroup = new Map<string, BitmapFigures>();
  for (const b of json.benches) {
    const avg = b.results[0]?.ok?.avg;
    if (avg === undefined) throw new Error(`bench "${b.name}" failed`);
    const impl = b.name.slice(0, b.name.indexOf(":"));
    const workload = b.name.slice(b.name.indexOf(":") + 1).trim();
    const f = byGroup.get(b.group) ?? { workload, wasmMicros: NaN, tsMicros: NaN };
    if (impl === "wasm") f.wasmMicros = avg / 1000;
    else f.tsMicros = avg / 1000;
    byGroup.set(b.group, f);
  }
  return [...byGroup.values()];
}
