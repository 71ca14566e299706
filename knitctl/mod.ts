/**
 * knitctl: the command-line client for the manager and the node agents.
 * @module
 */
export { main } from "./main.ts";
export {
  attachInterface,
  type AttachRequest,
  detachInterface,
  type ExtraInterfaceView,
} from "./agent_client.ts";
