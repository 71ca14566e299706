/** The manager's API test suite on a real etcd, shard 2: see support/etcd_suite.ts. */
import { etcdSuiteShard } from "./support/etcd_suite.ts";

etcdSuiteShard(2);
