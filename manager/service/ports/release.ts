/**
 * Releasing a port: its address goes back to its IP group, or into quarantine, or back to the
 * pool; a fixed MAC is freed; its address history ends.
 */
import { keys } from "../../model.ts";
import { closeStint } from "../history.ts";
import { readGroup, writeGroup } from "../ip_group_members.ts";
import { QuotaCharges } from "../quotas.ts";
import { type Ctx, retry } from "../context.ts";
import { quarantine, quarantining } from "../quarantine.ts";
import { resolveNetwork } from "../network_lookup.ts";
import { portToChange } from "./access.ts";
import { type PortTarget, portView, writeIndexes } from "./records.ts";
import { macFor } from "../../ipam/derived_mac.ts";

/** Releases the port's address (back to its IP group if it came from one). 404 when unknown. */
export async function deletePort(ctx: Ctx, target: PortTarget): Promise<void> {
  const { id } = target;
  const net = await resolveNetwork(ctx, { ...target, fresh: true });
  const pool = ctx.pools.addresses(net);
  const released = await pool.exclusive(() =>
    retry(ctx, async (tx) => {
      const e = await portToChange(ctx, { ...target, net, verb: "release" });
      const port = e.value;
      tx.check(e).delete(e.key);
      writeIndexes(tx, port, "delete");
      await closeStint(ctx, tx, { holder: port, ended: "released", net });
      const fixedMac = port.mac !== macFor(net.id, port.index);
      if (fixedMac) tx.delete(keys.mac(net.id, port.mac));
      const charges = new QuotaCharges(ctx, tx);
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
          return port;
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
      return port;
    })
  );
  ctx.feed.publish({ type: "port", op: "delete", port: portView(net, released) });
  ctx.metrics.releases.inc({ kind: "ip" });
}
