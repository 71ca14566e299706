/**
 * The node's BGP settings follow its Node object (agent/README.md, "BGP advertisement"): each
 * version the watch sees (kubernetes/node_watch.ts) is read (node_keys.ts), merged over the config
 * file's `bgp` section (bgp_settings.ts) and handed to the speaker, which reloads BIRD when they
 * changed. Bad keys never take the node down: the last good settings stay, and the error is logged
 * and raised as a Warning Event on the Node (once per distinct error) and kept for the metric.
 *
 * @module
 */
import type { Logger } from "@knitter/common";
import type { AgentConfig } from "../config.ts";
import type { NodeObject } from "../kubernetes/kube_pods.ts";
import type { BirdSettings } from "./bird_config.ts";
import type { BgpSpeaker } from "./bgp_speaker.ts";
import { bgpSettings } from "./bgp_settings.ts";
import { type KeyError, nodeBgp } from "./node_keys.ts";

/** The Event's reason, as `kubectl describe node` shows it. */
export const INVALID = "BGPSettingsInvalid";

export interface NodeBgpFollowerDeps {
  config: AgentConfig;
  nodeName: string;
  /** A Warning Event on the Node. */
  warn(node: NodeObject, reason: string, message: string): Promise<void>;
  log: Logger;
}

export class NodeBgpFollower {
  /** The Node's keys that are wrong now; none: the Node's settings (or the file's) apply. */
  errors: KeyError[] = [];
  /** The file's settings, before any Node is seen. */
  readonly initial: BirdSettings;
  private speaker?: Pick<BgpSpeaker, "configure" | "current">;
  /** The settings of the last Node seen before the speaker was attached. */
  private pending?: BirdSettings;
  /** The last error raised as an Event: the same one is not raised again. */
  private raised = "";

  constructor(private readonly d: NodeBgpFollowerDeps) {
    const file = bgpSettings(d.config);
    // The file alone may name peers without an ASN (left to the Nodes): none of them then.
    this.initial = "settings" in file
      ? file.settings
      : (bgpSettings(d.config, { peers: [] }) as { settings: BirdSettings }).settings;
  }

  /** The settings BIRD starts with: the Node's when it was seen already, else the file's. */
  get startWith(): BirdSettings {
    return this.pending ?? this.initial;
  }

  /** The speaker the settings go to; a Node seen before is applied now. */
  attach(speaker: Pick<BgpSpeaker, "configure" | "current">): void {
    this.speaker = speaker;
    if (this.pending) this.apply(this.pending);
    this.pending = undefined;
  }

  /** The Node as it is now (null: there is none, so none of its keys). */
  seen(node: NodeObject | null): void {
    const read = node ? nodeBgp(node) : { values: {}, errors: [] };
    const made = read.errors.length === 0 ? bgpSettings(this.d.config, read.values) : undefined;
    const errors = made && "missing" in made
      ? [{ key: "bgp.knitter.io/asn", message: made.missing }]
      : read.errors;
    this.errors = errors;
    if (errors.length > 0 || !made || !("settings" in made)) return this.complain(node, errors);
    this.raised = "";
    if (this.speaker) this.apply(made.settings);
    else this.pending = made.settings;
  }

  private apply(settings: BirdSettings): void {
    if (JSON.stringify(settings) === JSON.stringify(this.speaker!.current)) return;
    this.d.log.info("BGP: the node's settings changed, BIRD reloads them", {
      localAsn: settings.localAsn,
      routerId: settings.routerId,
      peers: settings.peers.map((p) => `${p.address} AS${p.asn}`),
      communities: settings.communities,
    });
    this.speaker!.configure(settings);
  }

  private complain(node: NodeObject | null, errors: KeyError[]): void {
    const what = errors.map((e) => `${e.key}: ${e.message}`).join("; ");
    const message = `The BGP settings of node ${this.d.nodeName} are not applied: ${what}. ` +
      "The last good settings stay until the keys are fixed or removed " +
      "(agent/README.md, BGP advertisement).";
    // The Node changes for other reasons too (its status): each error is told once.
    if (message === this.raised) return;
    this.raised = message;
    this.d.log.error("BGP: the Node's keys are wrong; the last good settings stay", {
      node: this.d.nodeName,
      errors: what,
    });
    if (node === null) return;
    this.d.warn(node, INVALID, message).catch((err) =>
      this.d.log.warn("BGP: cannot raise the Event on the Node", {
        error: String((err as Error)?.message ?? err),
      })
    );
  }
}
