/**
 * Who holds an address now, across manager replicas on one etcd (manager/service/history_holders.ts:
 * each replica's index in memory is caught up from etcd's watch before a query): a port another
 * replica allocated, released or bound again just before the query is answered right.
 */
import { heldRightAfterChanges } from "../manager/history_holders_scenario.ts";
import { openEtcdStore } from "../manager/store/etcd_store.ts";
import { testApp } from "../manager/test_support.ts";
import { startEtcd } from "./support/etcd.ts";

Deno.test("holders: a port another replica allocated, released or bound again just before a query is answered right (etcd)", async () => {
  await using etcd = await startEtcd();
  const replica = async (tenants: string[]) =>
    await testApp({
      store: await openEtcdStore({ endpoints: etcd.endpoints, prefix: "h/" }),
      tenants,
      historyRetentionDays: 30,
    });
  using writer = await replica(["acme"]);
  // The second replica finds the tenant the first made.
  using reader = await replica([]);
  await heldRightAfterChanges(writer, reader);
});
