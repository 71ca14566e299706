/** The manager's API test suite on a real etcd, shard 3: see support/etcd_suite.ts. */
import { runShard, shardTitle } from "./support/etcd_suite.ts";

Deno.test(shardTitle(3), () => runShard(3));
