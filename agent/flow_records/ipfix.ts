/**
 * IPFIX messages (RFC 7011): the encoder of the records the agent exports and the decoder of what
 * Open vSwitch sends it and of what knitctl's collector receives. Written from the RFC's layouts:
 *
 *   message header (16 bytes): version 10 (u16), length (u16), export time (u32, seconds),
 *     sequence number (u32: data records sent before this message), observation domain (u32)
 *   set header (4 bytes): set ID (u16: 2 template, 3 options template, >= 256 data), length (u16)
 *   template record: template ID (u16 >= 256), field count (u16), then per field: element ID
 *     (u16; the top bit says an enterprise number u32 follows), length (u16; 65535: variable)
 *   options template record: as a template, with the scope field count (u16) after the count
 *   data record: the fields in the template's order; a variable-length one starts with its
 *     length in one byte, or 255 and the length in two
 *
 * A set may end with padding shorter than a record. Templates are known per exporter and
 * observation domain (RFC 7011 section 8): a `TemplateStore` keeps them between messages; a data
 * set whose template is not known yet is counted, not decoded (the exporter sends it again).
 */

export const IPFIX_VERSION = 10;
export const TEMPLATE_SET = 2;
export const OPTIONS_TEMPLATE_SET = 3;
export const MIN_DATA_SET = 256;
/** A field's length that says "variable" (RFC 7011 section 7). */
export const VARIABLE = 65535;
const HEADER = 16;
const SET_HEADER = 4;

export class IpfixError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IpfixError";
  }
}

/** One field of a template: an information element, its length, its enterprise (absent: IANA). */
export interface FieldSpec {
  id: number;
  length: number;
  enterprise?: number;
}

export interface Template {
  id: number;
  fields: FieldSpec[];
  /** Options templates only: how many of the first fields are scope fields. */
  scopeCount?: number;
}

/** A data record: each field's bytes, in the template's order. */
export interface DataRecord {
  templateId: number;
  values: Uint8Array[];
}

export interface MessageHeader {
  exportTime: number;
  sequence: number;
  domain: number;
}

export interface Message extends MessageHeader {
  templates: Template[];
  records: DataRecord[];
}

/** A decoded message: its records with their templates, and the sets it could not read. */
export interface Decoded extends MessageHeader {
  templates: Template[];
  records: { template: Template; values: Uint8Array[] }[];
  /** Data sets whose template is not known (yet), by template ID. */
  unknownSets: number[];
}

/** The key of a field in a record read by name: "id" or "enterprise:id". */
export function fieldKey(f: FieldSpec): string {
  return f.enterprise === undefined ? String(f.id) : `${f.enterprise}:${f.id}`;
}

/** A decoded record as a map from field key to its bytes (the first of a repeated element). */
export function recordFields(
  r: { template: Template; values: Uint8Array[] },
): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  r.template.fields.forEach((f, i) => {
    const k = fieldKey(f);
    if (!out.has(k)) out.set(k, r.values[i]);
  });
  return out;
}

/** Encodes one message; the length and the sets' lengths are computed here. */
export function encodeMessage(m: Message): Uint8Array {
  const parts: Uint8Array[] = [];
  if (m.templates.length > 0) parts.push(templateSet(m.templates));
  for (const [id, records] of groupBy(m.records)) parts.push(dataSet(id, records, m.templates));
  const length = HEADER + parts.reduce((n, p) => n + p.length, 0);
  if (length > 0xffff) {
    throw new IpfixError(`an IPFIX message of ${length} bytes exceeds 65535: send fewer records`);
  }
  const out = new Uint8Array(length);
  const v = new DataView(out.buffer);
  v.setUint16(0, IPFIX_VERSION);
  v.setUint16(2, length);
  v.setUint32(4, m.exportTime >>> 0);
  v.setUint32(8, m.sequence >>> 0);
  v.setUint32(12, m.domain >>> 0);
  let at = HEADER;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The bytes one data record takes (for splitting records over messages). */
export function recordLength(values: Uint8Array[], t: Template): number {
  return t.fields.reduce((n, f, i) => n + fieldLength(f, values[i]), 0);
}

function groupBy(records: DataRecord[]): Map<number, DataRecord[]> {
  const out = new Map<number, DataRecord[]>();
  for (const r of records) {
    const list = out.get(r.templateId) ?? [];
    list.push(r);
    out.set(r.templateId, list);
  }
  return out;
}

function templateSet(templates: Template[]): Uint8Array {
  const bytes: number[] = [];
  const u16 = (n: number) => bytes.push(n >> 8 & 0xff, n & 0xff);
  const u32 = (n: number) => bytes.push(n >>> 24, n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff);
  const options = templates.some((t) => t.scopeCount !== undefined);
  u16(options ? OPTIONS_TEMPLATE_SET : TEMPLATE_SET);
  u16(0);
  for (const t of templates) {
    if (t.id < MIN_DATA_SET || t.id > 0xffff) {
      throw new IpfixError(`template ID ${t.id} is out of range: IDs are 256-65535`);
    }
    if ((t.scopeCount !== undefined) !== options) {
      throw new IpfixError("templates and options templates go in separate messages");
    }
    u16(t.id);
    u16(t.fields.length);
    if (t.scopeCount !== undefined) u16(t.scopeCount);
    for (const f of t.fields) {
      if (f.id < 1 || f.id > 0x7fff) {
        throw new IpfixError(`information element ${f.id} is out of range: 1-32767`);
      }
      u16(f.enterprise === undefined ? f.id : f.id | 0x8000);
      u16(f.length);
      if (f.enterprise !== undefined) u32(f.enterprise);
    }
  }
  bytes[2] = bytes.length >> 8;
  bytes[3] = bytes.length & 0xff;
  return Uint8Array.from(bytes);
}

function dataSet(id: number, records: DataRecord[], templates: Template[]): Uint8Array {
  const t = templates.find((x) => x.id === id);
  if (!t) throw new IpfixError(`data records of template ${id}, which the message does not carry`);
  const size = SET_HEADER + records.reduce((n, r) => n + recordLength(checked(r, t), t), 0);
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  v.setUint16(0, id);
  v.setUint16(2, size);
  let at = SET_HEADER;
  for (const r of records) {
    t.fields.forEach((f, i) => {
      const value = r.values[i];
      if (f.length === VARIABLE) {
        if (value.length < 255) {
          out[at++] = value.length;
        } else {
          out[at++] = 255;
          v.setUint16(at, value.length);
          at += 2;
        }
      }
      out.set(value, at);
      at += value.length;
    });
  }
  return out;
}

function checked(r: DataRecord, t: Template): Uint8Array[] {
  if (r.values.length !== t.fields.length) {
    throw new IpfixError(
      `a record of template ${t.id} has ${r.values.length} values for ${t.fields.length} fields`,
    );
  }
  t.fields.forEach((f, i) => {
    const n = r.values[i].length;
    if (f.length !== VARIABLE && n !== f.length) {
      throw new IpfixError(
        `field ${fieldKey(f)} of template ${t.id} takes ${f.length} bytes, not ${n}`,
      );
    }
    if (n > 0xffff - 3) throw new IpfixError(`field ${fieldKey(f)} is too long (${n} bytes)`);
  });
  return r.values;
}

function fieldLength(f: FieldSpec, value: Uint8Array): number {
  if (f.length !== VARIABLE) return f.length;
  return value.length + (value.length < 255 ? 1 : 3);
}

/**
 * The templates an exporter announced, per exporter and observation domain. Kept by whoever
 * receives a stream of messages (the agent from its switch, the collector from agents).
 */
export class TemplateStore {
  private readonly templates = new Map<string, Template>();

  get(source: string, domain: number, id: number): Template | undefined {
    return this.templates.get(`${source}/${domain}/${id}`);
  }

  /** A template with no field withdraws it (RFC 7011 section 8.1). */
  put(source: string, domain: number, t: Template): void {
    const key = `${source}/${domain}/${t.id}`;
    if (t.fields.length === 0) this.templates.delete(key);
    else this.templates.set(key, t);
  }

  get size(): number {
    return this.templates.size;
  }
}

/**
 * Decodes one message from `source` (the exporter's address), learning its templates into
 * `store`. Throws an IpfixError naming what is malformed (and nothing is learnt from it).
 */
export function decodeMessage(bytes: Uint8Array, store: TemplateStore, source: string): Decoded {
  if (bytes.length < HEADER) {
    throw new IpfixError(`an IPFIX message of ${bytes.length} bytes is shorter than its header`);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = v.getUint16(0);
  if (version !== IPFIX_VERSION) {
    throw new IpfixError(`version ${version} is not IPFIX (10): not an IPFIX message`);
  }
  const length = v.getUint16(2);
  if (length !== bytes.length) {
    throw new IpfixError(`the message says ${length} bytes but ${bytes.length} arrived`);
  }
  const out: Decoded = {
    exportTime: v.getUint32(4),
    sequence: v.getUint32(8),
    domain: v.getUint32(12),
    templates: [],
    records: [],
    unknownSets: [],
  };
  const sets: { id: number; body: Uint8Array }[] = [];
  for (let at = HEADER; at < length;) {
    if (length - at < SET_HEADER) throw new IpfixError(`a set header is cut at byte ${at}`);
    const id = v.getUint16(at);
    const size = v.getUint16(at + 2);
    if (size < SET_HEADER || at + size > length) {
      throw new IpfixError(`the set at byte ${at} says ${size} bytes, past the message's end`);
    }
    sets.push({ id, body: bytes.subarray(at + SET_HEADER, at + size) });
    at += size;
  }
  // Templates first, all of them checked before any is learnt; data sets after them.
  for (const s of sets) {
    if (s.id === TEMPLATE_SET || s.id === OPTIONS_TEMPLATE_SET) {
      out.templates.push(...readTemplates(s.body, s.id === OPTIONS_TEMPLATE_SET));
    } else if (s.id < MIN_DATA_SET) {
      throw new IpfixError(`set ID ${s.id} is reserved (RFC 7011 section 3.3.2)`);
    }
  }
  const learnt = new Map<number, Template>();
  for (const t of out.templates) learnt.set(t.id, t);
  for (const s of sets) {
    if (s.id < MIN_DATA_SET) continue;
    const t = learnt.get(s.id) ?? store.get(source, out.domain, s.id);
    if (!t || t.fields.length === 0) {
      out.unknownSets.push(s.id);
      continue;
    }
    for (const values of readRecords(s.body, t)) out.records.push({ template: t, values });
  }
  for (const t of out.templates) store.put(source, out.domain, t);
  return out;
}

function readTemplates(body: Uint8Array, options: boolean): Template[] {
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const out: Template[] = [];
  let at = 0;
  // A template record is at least 4 bytes; less is padding.
  while (body.length - at >= 4) {
    const id = v.getUint16(at);
    const count = v.getUint16(at + 2);
    at += 4;
    if (id < MIN_DATA_SET) {
      if (id === 0 && count === 0) break; // padding of zeros
      throw new IpfixError(`template ID ${id} is reserved: template IDs are 256-65535`);
    }
    let scopeCount: number | undefined;
    if (options && count > 0) {
      if (body.length - at < 2) throw new IpfixError(`options template ${id} is cut`);
      scopeCount = v.getUint16(at);
      at += 2;
      if (scopeCount === 0 || scopeCount > count) {
        throw new IpfixError(`options template ${id} has ${scopeCount} scope fields of ${count}`);
      }
    }
    const fields: FieldSpec[] = [];
    for (let i = 0; i < count; i++) {
      if (body.length - at < 4) throw new IpfixError(`template ${id} is cut at field ${i}`);
      const raw = v.getUint16(at);
      const length = v.getUint16(at + 2);
      at += 4;
      if (length === 0) throw new IpfixError(`template ${id}: field ${i} has length 0`);
      if (raw & 0x8000) {
        if (body.length - at < 4) throw new IpfixError(`template ${id} is cut at field ${i}`);
        fields.push({ id: raw & 0x7fff, length, enterprise: v.getUint32(at) });
        at += 4;
      } else {
        fields.push({ id: raw, length });
      }
    }
    out.push(scopeCount === undefined ? { id, fields } : { id, fields, scopeCount });
  }
  return out;
}

function readRecords(body: Uint8Array, t: Template): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  const fixed = t.fields.reduce((n, f) => n + (f.length === VARIABLE ? 1 : f.length), 0);
  let at = 0;
  // What is left shorter than the smallest record is padding (RFC 7011 section 3.3.1).
  while (body.length - at >= fixed) {
    const values: Uint8Array[] = [];
    for (const f of t.fields) {
      let n = f.length;
      if (n === VARIABLE) {
        n = body[at++];
        if (n === 255) {
          if (body.length - at < 2) throw new IpfixError(`a record of template ${t.id} is cut`);
          n = body[at] << 8 | body[at + 1];
          at += 2;
        }
      }
      if (body.length - at < n) throw new IpfixError(`a record of template ${t.id} is cut`);
      values.push(body.subarray(at, at + n));
      at += n;
    }
    out.push(values);
  }
  return out;
}

/** An unsigned field of any length up to 8 bytes (reduced-size encoding, RFC 7011 6.2). */
export function readUnsigned(b: Uint8Array | undefined): number {
  if (!b) return 0;
  let n = 0;
  for (const x of b) n = n * 256 + x;
  return n;
}

export function unsignedBytes(n: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = length - 1; i >= 0; i--) {
    out[i] = n % 256;
    n = Math.floor(n / 256);
  }
  return out;
}
