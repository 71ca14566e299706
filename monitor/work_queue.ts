/** The controllers' queue lives in common (the agent's hot-plug uses it too). */
export { Requeue, WorkQueue } from "@knitter/common";
