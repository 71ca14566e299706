/**
 * Whether an object's labels changed since it was last seen: pods and namespaces are updated often
 * (status, annotations), and only their labels move what a policy selects.
 */
export class LabelChanges {
  private readonly seen = new Map<string, string>();

  /** True the first time an object is seen and whenever its labels differ from the last time. */
  changed(obj: { metadata?: { uid?: string; labels?: Record<string, string> } }): boolean {
    const uid = obj.metadata?.uid;
    if (!uid) return true;
    const labels = JSON.stringify(Object.entries(obj.metadata?.labels ?? {}).sort());
    if (this.seen.get(uid) === labels) return false;
    this.seen.set(uid, labels);
    return true;
  }

  forget(obj: { metadata?: { uid?: string } }): void {
    if (obj.metadata?.uid) this.seen.delete(obj.metadata.uid);
  }
}
