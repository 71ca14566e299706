/**
 * monitor: follows Kubernetes for Knitter; see README.md.
 * @module
 */
export * from "./config.ts";
export * from "./crd_types.ts";
export { type MonitorStats, type RunningMonitor, startMonitor } from "./monitor.ts";
export { annotationProblem, INVALID_ANNOTATION } from "./pods.ts";
