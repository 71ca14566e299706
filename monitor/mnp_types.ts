/**
 * MultiNetworkPolicy, the Network Plumbing Working Group's policy for secondary networks (group
 * k8s.cni.cncf.io): a NetworkPolicy spec, and the annotation naming the networks it is for. The
 * monitor turns each into security groups of the namespace's tenant (mnp_translate.ts,
 * mnp_reconciler.ts).
 */
import type { LabelSelector } from "./label_selector.ts";
import type { ObjectMeta } from "./crd_types.ts";

export const MNP = {
  group: "k8s.cni.cncf.io",
  version: "v1beta1",
  plural: "multi-networkpolicies",
  kind: "MultiNetworkPolicy",
} as const;

/** The networks a policy is for: "net" or "namespace/net", comma separated. */
export const POLICY_FOR = "k8s.v1.cni.cncf.io/policy-for";

export interface IpBlock {
  cidr: string;
  except?: string[];
}

export interface PolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: IpBlock;
}

export interface PolicyPort {
  protocol?: string;
  /** A number, or a named container port (not supported: reported). */
  port?: number | string;
  endPort?: number;
}

export interface IngressRule {
  from?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface EgressRule {
  to?: PolicyPeer[];
  ports?: PolicyPort[];
}

export interface MultiNetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: string[];
  ingress?: IngressRule[];
  egress?: EgressRule[];
}

export interface MultiNetworkPolicy {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta & { labels?: Record<string, string> };
  spec: MultiNetworkPolicySpec;
}
