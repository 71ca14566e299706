/** Real etcd for the cross-process tests (the launcher lives beside the etcd store). */
export {
  deadEndpoint,
  type EtcdCluster,
  freePorts,
  MAX_TXN_OPS,
  startEtcd,
  waitForLeader,
} from "../../manager/store/etcd_test_support.ts";
