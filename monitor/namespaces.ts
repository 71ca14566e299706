/**
 * Namespaces are tenants. The tenant is ensured (an idempotent PUT) by whoever needs it first: the
 * agent for a namespace's first pod, the monitor for a namespace or a resource it sees. So a new
 * namespace's first pod never waits for the monitor. A deleted namespace's tenant is deleted once
 * it owns nothing.
 */
import { type Logger, type ManagerClient, ManagerError } from "@knitter/common";

export class Tenants {
  private readonly known = new Set<string>();

  constructor(private readonly manager: ManagerClient, private readonly log: Logger) {}

  async ensure(name: string): Promise<void> {
    if (this.known.has(name)) return;
    await this.manager.request("PUT", `/api/v1/tenants/${encodeURIComponent(name)}`);
    this.known.add(name);
  }

  /** Deletes the tenant of a deleted namespace; false while it still owns something. */
  async remove(name: string): Promise<boolean> {
    this.known.delete(name);
    try {
      await this.manager.request("DELETE", `/api/v1/tenants/${encodeURIComponent(name)}`);
      this.log.info("tenant deleted with its namespace", { tenant: name });
      return true;
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return true;
      if (err instanceof ManagerError && err.code === "in_use") return false;
      throw err;
    }
  }
}
