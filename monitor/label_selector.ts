/**
 * Kubernetes label selectors (matchLabels and matchExpressions), as a pod or namespace selector of
 * a policy names them. An empty selector selects everything; an operator Kubernetes does not
 * define is a problem the caller reports, never a silent "no match".
 */

export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export type Labels = Record<string, string>;

/** Why a selector cannot be evaluated, or null when it can. */
export function selectorProblem(s: LabelSelector): string | null {
  for (const e of s.matchExpressions ?? []) {
    const values = e.values ?? [];
    if (e.operator === "In" || e.operator === "NotIn") {
      if (values.length === 0) return `operator ${e.operator} on "${e.key}" needs values`;
    } else if (e.operator === "Exists" || e.operator === "DoesNotExist") {
      if (values.length > 0) return `operator ${e.operator} on "${e.key}" takes no values`;
    } else {
      return `operator "${e.operator}" on "${e.key}" is not one of In, NotIn, Exists, DoesNotExist`;
    }
  }
  return null;
}

/** Whether `labels` satisfy the selector (check selectorProblem first: bad operators match nothing). */
export function matchesSelector(s: LabelSelector, labels: Labels): boolean {
  for (const [k, v] of Object.entries(s.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of s.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const values = e.values ?? [];
    const ok = e.operator === "In"
      ? has && values.includes(labels[e.key])
      : e.operator === "NotIn"
      ? !has || !values.includes(labels[e.key])
      : e.operator === "Exists"
      ? has
      : e.operator === "DoesNotExist"
      ? !has
      : false;
    if (!ok) return false;
  }
  return true;
}
