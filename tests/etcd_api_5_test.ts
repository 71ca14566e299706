/** The manager's API test suite on a real etcd, shard 5: see support/etcd_suite.ts. */
import { etcdSuiteShard } from "./support/etcd_suite.ts";

etcdSuiteShard(5);
