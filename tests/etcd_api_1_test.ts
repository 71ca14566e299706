/** The manager's API test suite on a real etcd, shard 1: see support/etcd_suite.ts. */
import { runShard, shardTitle } from "./support/etcd_suite.ts";

Deno.test(shardTitle(1), () => runShard(1));
