// The sample(...) actions of flow records (see ../flow_sampling.ts and ../../agent/PIPELINE.md,
// "Flow records"). Part of the AssemblyScript flow compiler (flows.ts is the entry).

import { putDec, puts } from "./text";

// 0: no sampling, no action written (the lines of a node without flow records).
let probability: u32 = 0;
let collectorSet: u32 = 0;

/** Set before each compile: `p` out of 65535 packets to collector set `set`; p 0: none. */
export function sampling(p: u32, set: u32): void {
  probability = p;
  collectorSet = set;
}

/** Writes `sample(...),` at the start of an action list, when flow records are on. */
export function putSample(domain: u32, point: u32): void {
  if (probability == 0) return;
  puts("sample(probability=");
  putDec(probability);
  puts(",collector_set_id=");
  putDec(collectorSet);
  puts(",obs_domain_id=");
  putDec(domain);
  puts(",obs_point_id=");
  putDec(point);
  puts("),");
}

/** Whether sample actions are written (a drop flow's only action is then its sample). */
export function sampled(): bool {
  return probability != 0;
}
