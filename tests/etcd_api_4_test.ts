/** The manager's API test suite on a real etcd, shard 4: see support/etcd_suite.ts. */
import { runShard, shardTitle } from "./support/etcd_suite.ts";

Deno.test(shardTitle(4), () => runShard(4));
