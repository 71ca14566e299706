/**
 * Tx checksum offload off on an interface in another netns, by the ethtool ioctl from this
 * process: what `ethtool -K DEV tx off` does, without the exec (about 1.3 ms of a pod's ADD, and a
 * fork per pod in a burst). The socket is opened in the pod's netns by entering it on this thread
 * and coming back before any other code runs here (all calls are synchronous); the ioctl then acts
 * on that netns's devices.
 *
 * Needs the FFI permission; {@link txChecksumIoctl} is undefined without it (callers exec ethtool).
 */

// <linux/ethtool.h>, <linux/sockios.h>, <sched.h>, <fcntl.h>, <sys/socket.h>
const SIOCETHTOOL = 0x8946;
const ETHTOOL_GSSET_INFO = 0x37;
const ETHTOOL_GSTRINGS = 0x1b;
const ETHTOOL_SFEATURES = 0x3b;
const ETH_SS_FEATURES = 4;
const ETH_GSTRING_LEN = 32;
const IFNAMSIZ = 16;
const CLONE_NEWNET = 0x40000000;
const O_RDONLY_CLOEXEC = 0o2000000;
const AF_INET = 2;
const SOCK_DGRAM_CLOEXEC = 2 | 0o2000000;

/** The features `ethtool -K DEV tx off` turns off: every "tx-checksum-*" one. */
const TX_CHECKSUM_PREFIX = "tx-checksum-";

const SYMBOLS = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  setns: { parameters: ["i32", "i32"], result: "i32" },
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
  strerror: { parameters: ["i32"], result: "pointer" },
} as const;

type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

export type TxChecksumOff = (netns: string, ifName: string) => void;

/** The ioctl path, or undefined where FFI is not allowed (or libc cannot be opened). */
export const txChecksumIoctl: TxChecksumOff | undefined = load();

function load(): TxChecksumOff | undefined {
  if (Deno.build.os !== "linux") return undefined;
  if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return undefined;
  let libc: Libc;
  try {
    libc = Deno.dlopen("libc.so.6", SYMBOLS).symbols;
  } catch {
    return undefined;
  }
  const own = libc.open(cString("/proc/thread-self/ns/net"), O_RDONLY_CLOEXEC);
  if (own < 0) return undefined;
  let bits: number[] | undefined;
  return (netns, ifName) => {
    const sock = socketIn(libc, own, netns);
    try {
      bits ??= txChecksumBits(libc, sock, ifName);
      setFeaturesOff(libc, sock, ifName, bits);
    } finally {
      libc.close(sock);
    }
  };
}

/** A datagram socket in `netns`: this thread enters it, opens the socket and comes back. */
function socketIn(libc: Libc, own: number, netns: string): number {
  const target = libc.open(cString(netns), O_RDONLY_CLOEXEC);
  if (target < 0) throw failure(libc, `cannot open the netns ${netns}`);
  try {
    if (libc.setns(target, CLONE_NEWNET) !== 0) {
      throw failure(libc, `cannot enter the netns ${netns}`);
    }
    const sock = libc.socket(AF_INET, SOCK_DGRAM_CLOEXEC, 0);
    const error = sock < 0 ? failure(libc, `cannot open a socket in ${netns}`) : undefined;
    if (libc.setns(own, CLONE_NEWNET) !== 0) {
      // Every later socket of this thread would be the pod's: nothing sane is left to do.
      console.error(`knitter agent: cannot return to its own netns from ${netns}; exiting`);
      Deno.exit(70);
    }
    if (error) throw error;
    return sock;
  } finally {
    libc.close(target);
  }
}

/**
 * The bit of each "tx-checksum-*" feature, from the kernel's own feature names (their order is
 * the kernel's, not an ABI). The same for every device of this kernel, so read once.
 */
function txChecksumBits(libc: Libc, sock: number, ifName: string): number[] {
  const info = new DataView(new ArrayBuffer(20));
  info.setUint32(0, ETHTOOL_GSSET_INFO, true);
  info.setBigUint64(8, 1n << BigInt(ETH_SS_FEATURES), true);
  ethtool(libc, sock, ifName, info, "read the feature count");
  const count = info.getUint32(16, true);
  const strings = new DataView(new ArrayBuffer(12 + count * ETH_GSTRING_LEN));
  strings.setUint32(0, ETHTOOL_GSTRINGS, true);
  strings.setUint32(4, ETH_SS_FEATURES, true);
  strings.setUint32(8, count, true);
  ethtool(libc, sock, ifName, strings, "read the feature names");
  const bits: number[] = [];
  const text = new TextDecoder();
  for (let i = 0; i < count; i++) {
    const raw = new Uint8Array(strings.buffer, 12 + i * ETH_GSTRING_LEN, ETH_GSTRING_LEN);
    const end = raw.indexOf(0);
    const name = text.decode(raw.subarray(0, end < 0 ? ETH_GSTRING_LEN : end));
    if (name.startsWith(TX_CHECKSUM_PREFIX)) bits.push(i);
  }
  if (bits.length === 0) throw new Error("the kernel names no tx-checksum-* feature");
  return bits;
}

/** Wanted off, for the bits given; features that depend on them (TSO) follow in the kernel. */
function setFeaturesOff(libc: Libc, sock: number, ifName: string, bits: number[]): void {
  const blocks = Math.floor(Math.max(...bits) / 32) + 1;
  const req = new DataView(new ArrayBuffer(8 + blocks * 8));
  req.setUint32(0, ETHTOOL_SFEATURES, true);
  req.setUint32(4, blocks, true);
  for (const bit of bits) {
    const at = 8 + Math.floor(bit / 32) * 8;
    req.setUint32(at, req.getUint32(at, true) | (1 << (bit % 32)) >>> 0, true);
  }
  ethtool(libc, sock, ifName, req, "turn off tx checksum offload");
}

function ethtool(libc: Libc, sock: number, ifName: string, data: DataView, what: string): void {
  const name = new TextEncoder().encode(ifName);
  if (name.length >= IFNAMSIZ) throw new Error(`invalid interface name "${ifName}"`);
  const ifr = new Uint8Array(40);
  ifr.set(name);
  const pointer = Deno.UnsafePointer.of(new Uint8Array(data.buffer));
  new DataView(ifr.buffer).setBigUint64(16, BigInt(Deno.UnsafePointer.value(pointer)), true);
  // Negative is an error; a positive answer only says the kernel adjusted dependent features.
  if (libc.ioctl(sock, BigInt(SIOCETHTOOL), ifr) < 0) {
    throw failure(libc, `cannot ${what} on ${ifName}`);
  }
}

function failure(libc: Libc, what: string): Error {
  const errno = new Deno.UnsafePointerView(libc.__errno_location()!).getInt32();
  const text = Deno.UnsafePointerView.getCString(libc.strerror(errno)!);
  return new Error(`${what}: ${text}`);
}

function cString(text: string): Uint8Array {
  return new TextEncoder().encode(text + "\0");
}
