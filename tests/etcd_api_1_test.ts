/** The manager's API test suite on a real etcd, shard 1: see support/etcd_suite.ts. */
import { etcdSuiteShard } from "./support/etcd_suite.ts";

etcdSuiteShard(1);
