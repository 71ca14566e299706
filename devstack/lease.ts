/**
 * A test's lease on the names of its prefix (stale.ts sweeps those of tests that are gone): a file
 * named by the prefix, holding the pid of the test process.
 */
export const LEASES_DIR = "/tmp/knitter-test-leases";

/** Records that this process owns the names of `prefix` until dropLease. */
export function takeLease(prefix: string): void {
  Deno.mkdirSync(LEASES_DIR, { recursive: true });
  Deno.writeTextFileSync(`${LEASES_DIR}/${prefix}`, String(Deno.pid));
}

export async function dropLease(prefix: string): Promise<void> {
  await Deno.remove(`${LEASES_DIR}/${prefix}`).catch(() => {});
}
