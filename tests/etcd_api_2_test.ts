/** The manager's API test suite on a real etcd, shard 2: see support/etcd_suite.ts. */
import { runShard, shardTitle } from "./support/etcd_suite.ts";

Deno.test(shardTitle(2), () => runShard(2));
