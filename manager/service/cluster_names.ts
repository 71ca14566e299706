/**
 * Names scoped by cluster. A node's identity at the manager, a port's ID and a pod's namespace in
 * the pod index carry their cluster as a suffix ("worker1@east"), except in the default cluster,
 * whose names are bare: what a single-cluster install stored stays valid as it is. The suffix can
 * never be part of a name itself ('@' is in no node name, port ID or namespace).
 *
 * A cluster's own tokens (its agents, its monitor) speak its names bare: what they send is scoped
 * to their cluster here, and what they are answered is made relative to it again (relativeBody):
 * their own cluster's names bare, other clusters' with the suffix, the default's as "@default".
 */
export const DEFAULT_CLUSTER = "default";

const SEP = "@";

/** `name` as the manager knows it in `cluster`. */
export function scoped(name: string, cluster: string): string {
  return cluster === DEFAULT_CLUSTER ? name : `${name}${SEP}${cluster}`;
}

/** The bare name and the cluster of a scoped name. */
export function unscoped(id: string): { name: string; cluster: string } {
  const at = id.lastIndexOf(SEP);
  return at < 0
    ? { name: id, cluster: DEFAULT_CLUSTER }
    : { name: id.slice(0, at), cluster: id.slice(at + 1) };
}

/** A scoped name as a token of `viewer` (a cluster) reads it. */
export function relativeTo(viewer: string, id: string): string {
  const { name, cluster } = unscoped(id);
  return cluster === viewer ? name : `${name}${SEP}${cluster}`;
}

/** The scoped name of what a token of `viewer` names (relativeTo's inverse). */
export function fromRelative(viewer: string, name: string): string {
  const { name: bare, cluster } = unscoped(name);
  return scoped(bare, name.includes(SEP) ? cluster : viewer);
}

/** Whether a name a cluster's token sent names another cluster (it may only name its own). */
export function namesACluster(name: string): boolean {
  return name.includes(SEP);
}
