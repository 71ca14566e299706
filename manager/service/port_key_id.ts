/**
 * The ID a port is stored under in its network. A tenant's port on another tenant's (public)
 * network is scoped by its tenant ("tenant/id"; port IDs hold no "/"), so that no tenant can take
 * an ID that another tenant's pod will ask for (a stable ID made of namespace and pod name). Its own
 * module so that the address history, which the ports' modules use, finds a port without them.
 */
export function keyId(networkTenant: string, owner: string, id: string): string {
  return owner === networkTenant ? id : `${owner}/${id}`;
}
