/**
 * A JSON answer already encoded, served as it is (app.ts): one feed page is encoded once and its
 * bytes shared by every follower whose view of it is the same (service/cluster_view.ts feedFor),
 * instead of each request filtering, renaming and stringifying its own copy.
 */
export class EncodedJson {
  /** How many events the page holds, as its reader sees them (0: nothing for it). */
  constructor(readonly bytes: Uint8Array<ArrayBuffer>, readonly events: number) {}

  static of(value: { cursor: string; events: unknown[] }): EncodedJson {
    return new EncodedJson(ENCODER.encode(JSON.stringify(value)), value.events.length);
  }
}

const ENCODER = new TextEncoder();
