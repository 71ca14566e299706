/**
 * The MAC a network hands out with an address when the port asks for none: derived from the
 * network's ID and the address's pool index, so that it needs no key of its own.
 */

/**
 * A locally administered unicast MAC that is unique within the network: two bytes from the network
 * ID, three from the address's pool index (pools never exceed 2^24 addresses).
 */
export function macFor(networkId: string, index: number): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < networkId.length; i++) h = Math.imul(h ^ networkId.charCodeAt(i), 0x01000193);
  const bytes = [
    0x02,
    (h >>> 8) & 0xff,
    h & 0xff,
    (index >>> 16) & 0xff,
    (index >>> 8) & 0xff,
    index & 0xff,
  ];
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/** The first three bytes every derived MAC of the network shares ("02:xx:xx"). */
export function macBlock(networkId: string): string {
  return macFor(networkId, 0).slice(0, 8);
}

/** The pool index a MAC of a network's block stands for (its last three bytes). */
export function macIndex(mac: string): number {
  return parseInt(mac.slice(9).replaceAll(":", ""), 16);
}
