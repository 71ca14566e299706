/**
 * The node's BGP speaker (agent/README.md, "BGP advertisement"): the agent's own BIRD 2. The agent
 * renders its configuration (bird_config.ts), writes it atomically, starts `bird` (through
 * common/run.ts; it forks, and its pid, from its pid file, is the agent's to stop) or has the
 * running one reload it with `birdc configure` whenever what the node advertises changes, and
 * stops it (SIGTERM: BIRD tells its peers, which withdraw at once) when the agent stops. A BIRD
 * left running by an agent that crashed is taken over as it is: its sessions stay up.
 *
 * @module
 */
import { type Logger, run } from "@knitter/common";
import type { AgentConfig } from "../config.ts";
import { type Advertised, birdConfig, type BirdSettings, peerName } from "./bird_config.ts";
import { stateDirOf } from "./bgp_settings.ts";

/** Where BIRD and its files are. */
export interface BirdPaths {
  bird: string;
  birdc: string;
  configFile: string;
  controlSocket: string;
  pidFile: string;
}

/** What the speaker does to the node: commands, files, signals (tests may watch them). */
export interface SpeakerSeams {
  run: typeof run;
  kill(pid: number, signal: Deno.Signal): void;
}

const NODE: SpeakerSeams = { run, kill: (pid, signal) => Deno.kill(pid, signal) };

/** One BGP session as `birdc show protocols` tells it. */
export interface BgpSession {
  /** The protocol's name (bird_config.ts peerName) and the peer's address. */
  name: string;
  peer: string;
  /** BIRD's protocol state (up, start, down) and BGP state (Established, Active, Connect...). */
  state: string;
  info: string;
  established: boolean;
}

const NONE: Advertised = { v4: [], v6: [] };

/** How long a stopped BIRD may take to tell its peers and exit before it is killed. */
const STOP_WAIT_MS = 5000;

/** How long BIRD may take to write its pid file once `bird` returned. */
const PID_WAIT_MS = 2000;

/** How often the agent checks that its BIRD answers (one that died is started again). */
const WATCH_MS = 5000;

export class BgpSpeaker {
  private wanted: Advertised = NONE;
  /** The configuration BIRD runs now; "" makes the next apply write and reload it again. */
  private applied = "";
  private chain: Promise<void> = Promise.resolve();
  private pid: number | null = null;
  private stopping = false;
  private watch: ReturnType<typeof setInterval> | undefined;

  constructor(
    private settings: BirdSettings,
    private readonly paths: BirdPaths,
    private readonly log: Logger,
    private readonly seams: SpeakerSeams = NODE,
  ) {}

  /** What the node advertises now. */
  get advertised(): Advertised {
    return this.wanted;
  }

  /**
   * Starts BIRD with nothing advertised (or takes over the one already answering on the control
   * socket). Fails with what to do when BIRD is missing or refuses its configuration.
   */
  async start(): Promise<void> {
    await this.write(birdConfig(this.settings, NONE));
    if (await this.answers()) {
      await this.reload();
      this.pid = await this.readPid();
      this.log.info("BGP: took over the running BIRD", { pid: this.pid });
    } else {
      await this.launch();
    }
    this.applied = birdConfig(this.settings, NONE);
    this.watch = setInterval(() => this.revive(), WATCH_MS);
  }

  /** A BIRD that died (killed, crashed) is started again with what the node advertises. */
  private revive(): void {
    this.chain = this.chain.then(async () => {
      if (this.stopping || await this.answers()) return;
      this.log.warn("BGP: BIRD does not answer on its control socket: starting it again", {
        socket: this.paths.controlSocket,
      });
      this.applied = "";
      await this.apply();
    });
  }

  /**
   * Speaks with these settings from now on (the Node's keys changed): BIRD reloads its
   * configuration, and only the sessions whose settings changed start again.
   */
  configure(settings: BirdSettings): void {
    this.settings = settings;
    this.chain = this.chain.then(() => this.apply());
  }

  /** What BIRD is told now (peers, ASN, next hops). */
  get current(): BirdSettings {
    return this.settings;
  }

  /** Advertises `routes` from now on; applied in order, the latest wins (see settled). */
  advertise(routes: Advertised): void {
    this.wanted = routes;
    this.chain = this.chain.then(() => this.apply());
  }

  /** Resolves once every advertise() so far is applied (or failed and logged). */
  settled(): Promise<void> {
    return this.chain;
  }

  /** Stops BIRD: its peers withdraw every route of the node. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.watch);
    await this.chain;
    // The file first: it names the BIRD running now, whoever started it.
    const pid = await this.readPid() ?? this.pid;
    if (pid === null) return;
    this.pid = null;
    try {
      this.seams.kill(pid, "SIGTERM");
    } catch {
      return; // gone already
    }
    const until = Date.now() + STOP_WAIT_MS;
    while (Date.now() < until && this.alive(pid)) await new Promise((r) => setTimeout(r, 20));
    if (this.alive(pid)) this.seams.kill(pid, "SIGKILL");
    this.log.info("BGP: BIRD stopped, routes withdrawn", { pid });
  }

  /** The BGP sessions and their state; none when BIRD does not answer. */
  async sessions(): Promise<BgpSession[]> {
    const r = await this.birdc(["show", "protocols"]);
    if (r.code !== 0) return [];
    return parseProtocols(r.stdout, this.settings.peers.map((p) => p.address));
  }

  private async apply(): Promise<void> {
    if (this.stopping) return;
    const text = birdConfig(this.settings, this.wanted);
    if (text === this.applied) return;
    try {
      await this.write(text);
      // A BIRD that went away (killed, crashed) is started again, with the wanted routes.
      if (await this.answers()) await this.reload();
      else await this.launch();
      this.applied = text;
      this.log.info("BGP: advertised", {
        v4: this.wanted.v4.length,
        v6: this.settings.nextHop6 === undefined ? 0 : this.wanted.v6.length,
        peers: this.settings.peers.length,
      });
    } catch (err) {
      this.applied = "";
      this.log.error("BGP: cannot apply what the node advertises; tried again at the next change", {
        error: err instanceof Error ? err.message : String(err),
        config: this.paths.configFile,
      });
    }
  }

  /** Written beside itself, then renamed over: BIRD never reads half a file. */
  private async write(text: string): Promise<void> {
    const tmp = `${this.paths.configFile}.tmp`;
    await Deno.writeTextFile(tmp, text + "\n", { mode: 0o600 });
    await Deno.rename(tmp, this.paths.configFile);
  }

  /** Starts BIRD; it forks into the background once its configuration is read. */
  private async launch(): Promise<void> {
    const { bird, configFile, controlSocket, pidFile } = this.paths;
    // A dead BIRD's pid must not be taken for the new one's: BIRD writes the file after it forked,
    // maybe after `bird` returned.
    await Deno.remove(pidFile).catch(() => {});
    await this.seams.run([bird, "-c", configFile, "-s", controlSocket, "-P", pidFile]);
    const until = Date.now() + PID_WAIT_MS;
    while ((this.pid = await this.readPid()) === null && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 10));
    }
    this.log.info("BGP: BIRD started", { pid: this.pid, peers: this.settings.peers.length });
  }

  /** `birdc configure`: BIRD reads the file again; a refusal is an error naming its reason. */
  private async reload(): Promise<void> {
    const r = await this.birdc(["configure"]);
    if (r.code === 0 && /Reconfigur(ed|ation in progress)/.test(r.stdout)) return;
    throw new Error(
      `BIRD refused its configuration ${this.paths.configFile}: ${
        (r.stdout + r.stderr).trim().split("\n").slice(-3).join(" ")
      }`,
    );
  }

  private async answers(): Promise<boolean> {
    const r = await this.birdc(["show", "status"]);
    return r.code === 0 && r.stdout.includes("Daemon is up");
  }

  private birdc(args: string[]) {
    return this.seams.run([this.paths.birdc, "-s", this.paths.controlSocket, ...args], {
      check: false,
      timeoutMs: 10_000,
    }).catch((err) => ({ code: 1, stdout: "", stderr: String(err), argv: [], ms: 0 }));
  }

  private async readPid(): Promise<number | null> {
    try {
      const pid = Number((await Deno.readTextFile(this.paths.pidFile)).trim());
      return Number.isInteger(pid) && pid > 0 ? pid : null;
    } catch {
      return null;
    }
  }

  /** Running, and not a zombie no one reaped yet. */
  private alive(pid: number): boolean {
    try {
      const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
      return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
    } catch {
      return false;
    }
  }
}

/**
 * The BGP lines of `birdc show protocols`:
 * "peer_192_0_2_1  BGP  ---  up  23:16:34.872  Established". `peers` are the configured
 * addresses (peerName).
 */
export function parseProtocols(text: string, peers: string[]): BgpSession[] {
  const out: BgpSession[] = [];
  for (const line of text.split("\n")) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 4 || cols[1] !== "BGP") continue;
    const i = peers.findIndex((p) => peerName(p) === cols[0]);
    if (i < 0) continue;
    const info = cols.slice(5).join(" ");
    out.push({
      name: cols[0],
      peer: peers[i],
      state: cols[3],
      info,
      established: info.startsWith("Established"),
    });
  }
  return out;
}

/**
 * The speaker of an agent's `bgp` section with the settings given (bgp_settings.ts): BIRD's files
 * in the state directory unless named.
 */
export function speakerFor(
  config: AgentConfig,
  settings: BirdSettings,
  log: Logger,
  seams: SpeakerSeams = NODE,
): BgpSpeaker {
  const bgp = config.bgp!;
  const dir = stateDirOf(config);
  return new BgpSpeaker(
    settings,
    {
      bird: bgp.bird,
      birdc: bgp.birdc,
      configFile: bgp.configFile ?? `${dir}/bird.conf`,
      controlSocket: bgp.controlSocket ?? `${dir}/bird.ctl`,
      pidFile: `${dir}/bird.pid`,
    },
    log,
    seams,
  );
}
