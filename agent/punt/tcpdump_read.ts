/**
 * Test support: frames written to a pcap file and read back by tcpdump (`-r -vv -nn`), which
 * decodes every header and checks every checksum: the yardstick of the packet builders.
 * @module
 */
import { run } from "@knitter/common";

/** tcpdump's text for each frame (one entry per frame, its continuation lines joined). */
export async function tcpdumpRead(frames: Uint8Array[]): Promise<string[]> {
  const file = await Deno.makeTempFile({ suffix: ".pcap" });
  try {
    await Deno.writeFile(file, pcap(frames));
    const r = await run(["tcpdump", "-r", file, "-vv", "-nn", "-t"]);
    return r.stdout.split(/\n(?=\S)/).map((s) => s.replace(/\s*\n\s*/g, " ").trim())
      .filter((s) => s.length > 0);
  } finally {
    await Deno.remove(file);
  }
}

/** A pcap file (little-endian, microseconds, Ethernet) of the frames. */
function pcap(frames: Uint8Array[]): Uint8Array {
  const size = 24 + frames.reduce((n, f) => n + 16 + f.length, 0);
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  v.setUint32(0, 0xa1b2c3d4, true);
  v.setUint16(4, 2, true);
  v.setUint16(6, 4, true);
  v.setUint32(16, 65535, true);
  v.setUint32(20, 1, true);
  let at = 24;
  for (const f of frames) {
    v.setUint32(at + 8, f.length, true);
    v.setUint32(at + 12, f.length, true);
    out.set(f, at + 16);
    at += 16 + f.length;
  }
  return out;
}
