/**
 * Releasing a port: its address goes back to its IP group, or into quarantine, or back to the
 * pool, or stays its claim's; a fixed MAC is freed; its address history ends.
 */
import { keys, type PortRecord } from "../../model.ts";
import { closeStint } from "../history.ts";
import { readGroup, writeGroup } from "../ip_group_members.ts";
import { QuotaCharges } from "../quotas.ts";
import { type Ctx, retry } from "../context.ts";
import { quarantine, quarantining } from "../quarantine.ts";
import { resolveNetwork } from "../network_lookup.ts";
import { portToChange } from "./access.ts";
import { leaveClaim } from "./claimed.ts";
import { type PortTarget, portView, writeIndexes } from "./records.ts";
import { macFor } from "../../ipam/derived_mac.ts";

/**
 * Releases the port's address (back to its IP group if it came from one; a claim's stays the
 * claim's). 404 when unknown.
 */
export async function deletePort(ctx: Ctx, target: PortTarget): Promise<void> {
  const { id } = target;
  const net = await resolveNetwork(ctx, { ...target, fresh: true });
  const pool = ctx.pools.addresses(net);
  const { port: released, promoted, kept } = await pool.exclusive(() =>
    retry(ctx, async (tx): Promise<Released> => {
      const e = await portToChange(ctx, { ...target, net, verb: "release" });
      const port = e.value;
      tx.check(e).delete(e.key);
      writeIndexes(tx, port, "delete");
      await closeStint(ctx, tx, { holder: port, ended: "released", net });
      const charges = new QuotaCharges(ctx, tx, net.id);
      if (port.claim !== undefined) {
        const left = await leaveClaim(ctx, tx, { net, port });
        if (left) {
          await charges.charge(port.tenant, { ports: -1 });
          charges.flush();
          return { port, ...left, kept: true };
        }
      }
      const fixedMac = port.mac !== macFor(net.id, port.index);
      if (fixedMac) tx.delete(keys.mac(net.id, port.mac));
      if (port.ipGroup !== undefined) {
        const ge = await readGroup(ctx.store, port.tenant, port.ipGroup);
        if (ge.value) {
          const addresses = ge.value.addresses.map((
            a,
          ) => (a.port === id ? { ip: a.ip, index: a.index } : a));
          tx.check(ge);
          writeGroup(tx, ge.value, { ...ge.value, addresses });
          await charges.charge(port.tenant, { ports: -1 });
          charges.flush();
          return { port };
        }
      }
      if (quarantining(ctx)) {
        // The bit stays set until the quarantine ends (../quarantine.ts).
        await quarantine(ctx, tx, { net, port, fixedMac });
      } else {
        const edit = await pool.edit(tx);
        await edit.release(port.index);
        edit.flush();
      }
      await charges.charge(port.tenant, { ports: -1, addresses: -1 });
      charges.flush();
      return { port };
    })
  );
  ctx.feed.publish({ type: "port", op: "delete", port: portView(net, released) });
  if (promoted) ctx.feed.publish({ type: "port", op: "put", port: portView(net, promoted) });
  if (!kept) ctx.metrics.releases.inc({ kind: "ip" });
}

/** A released port, the other port of its claim if it became active, and whether it kept its address. */
interface Released {
  port: PortRecord;
  promoted?: PortRecord;
  /** The address stays its claim's. */
  kept?: true;
}
