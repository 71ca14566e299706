/**
 * The Kubernetes kinds deploy/ uses, each with the kubernetes-models class that validates it
 * against the upstream OpenAPI schema and the TypeScript interface that knows its exact fields.
 */
import {
  ConfigMap,
  Namespace,
  PersistentVolumeClaim,
  Secret,
  Service,
  ServiceAccount,
} from "kubernetes-models/v1";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import {
  ClusterRole,
  ClusterRoleBinding,
  Role,
  RoleBinding,
} from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { CustomResourceDefinition } from "kubernetes-models/apiextensions.k8s.io/v1";

export interface Kind {
  /** The kubernetes-models class: `new model(object).validate()` throws for a bad object. */
  // deno-lint-ignore no-explicit-any
  model: new (data: any) => { validate(): void };
  /** Module of the kubernetes-models package declaring `I<Kind>`, for exact-field checks. */
  module: string;
}

export const KUBERNETES_MODELS = "npm:kubernetes-models@5.1.0";

/** Keyed by "apiVersion/Kind". */
export const KINDS: Record<string, Kind> = {
  "v1/Namespace": { model: Namespace, module: "v1/Namespace" },
  "v1/ServiceAccount": { model: ServiceAccount, module: "v1/ServiceAccount" },
  "v1/Service": { model: Service, module: "v1/Service" },
  "v1/PersistentVolumeClaim": { model: PersistentVolumeClaim, module: "v1/PersistentVolumeClaim" },
  "v1/ConfigMap": { model: ConfigMap, module: "v1/ConfigMap" },
  "v1/Secret": { model: Secret, module: "v1/Secret" },
  "apps/v1/Deployment": { model: Deployment, module: "apps/v1/Deployment" },
  "apps/v1/DaemonSet": { model: DaemonSet, module: "apps/v1/DaemonSet" },
  "rbac.authorization.k8s.io/v1/ClusterRole": {
    model: ClusterRole,
    module: "rbac.authorization.k8s.io/v1/ClusterRole",
  },
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
    model: ClusterRoleBinding,
    module: "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
  },
  "rbac.authorization.k8s.io/v1/Role": { model: Role, module: "rbac.authorization.k8s.io/v1/Role" },
  "rbac.authorization.k8s.io/v1/RoleBinding": {
    model: RoleBinding,
    module: "rbac.authorization.k8s.io/v1/RoleBinding",
  },
  "apiextensions.k8s.io/v1/CustomResourceDefinition": {
    model: CustomResourceDefinition,
    module: "apiextensions.k8s.io/v1/CustomResourceDefinition",
  },
};

// deno-lint-ignore no-explicit-any
export function kindKey(object: any): string {
  return `${object.apiVersion}/${object.kind}`;
}
