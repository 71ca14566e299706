/**
 * The IPFIX codec against byte vectors written by hand from RFC 7011's layouts (sections 3.1,
 * 3.3, 3.4 and 7), round trips, and the malformed messages a receiver must refuse.
 */
import assert from "node:assert/strict";
import {
  decodeMessage,
  encodeMessage,
  IpfixError,
  readUnsigned,
  recordFields,
  type Template,
  TemplateStore,
  unsignedBytes,
} from "./ipfix.ts";

const PEN = 32473;

/** Bytes from a list of hex words ("000a 0040 ..."). */
function hex(text: string): Uint8Array {
  const digits = text.replace(/\s+/g, "");
  return Uint8Array.from((digits.match(/../g) ?? []).map((b) => parseInt(b, 16)));
}

// Template 256: sourceIPv4Address (8, 4), destinationIPv4Address (12, 4), octetDeltaCount (1, 8),
// enterprise 32473 element 1, variable length. One record: 10.0.0.1 -> 10.0.0.2, 1500 bytes,
// "acme"; the data set padded with 3 zero bytes.
const TEMPLATE_SET = "0002 001c" + // set 2, 28 bytes
  "0100 0004" + // template 256, 4 fields
  "0008 0004  000c 0004  0001 0008" +
  "8001 ffff 00007ed9"; // enterprise bit + element 1, variable, PEN 32473
const DATA_SET = "0100 001c" + // set 256, 28 bytes
  "0a000001 0a000002 00000000000005dc 04 61636d65" + // the record, 21 bytes
  "000000"; // padding
const MESSAGE = "000a 0048" + // version 10, 72 bytes
  "6566f400" + // export time
  "00000007" + // sequence 7
  "0000002a" + // observation domain 42
  TEMPLATE_SET + DATA_SET;

const T256: Template = {
  id: 256,
  fields: [
    { id: 8, length: 4 },
    { id: 12, length: 4 },
    { id: 1, length: 8 },
    { id: 1, length: 65535, enterprise: PEN },
  ],
};

Deno.test("ipfix: decodes a message written from RFC 7011's layouts: header, template, a padded data set", () => {
  const store = new TemplateStore();
  const m = decodeMessage(hex(MESSAGE), store, "192.0.2.1:4739");
  assert.deepEqual([m.exportTime, m.sequence, m.domain], [0x6566f400, 7, 42]);
  assert.deepEqual(m.templates, [T256]);
  assert.equal(m.records.length, 1, "the padding is no record");
  const f = recordFields(m.records[0]);
  assert.deepEqual([...f.get("8")!], [10, 0, 0, 1]);
  assert.deepEqual([...f.get("12")!], [10, 0, 0, 2]);
  assert.equal(readUnsigned(f.get("1")), 1500);
  assert.equal(new TextDecoder().decode(f.get(`${PEN}:1`)), "acme");
  assert.equal(store.size, 1, "the template is kept for the next messages");
});

Deno.test("ipfix: encodes the same bytes as the hand-written message (without its padding)", () => {
  const values = [
    hex("0a000001"),
    hex("0a000002"),
    unsignedBytes(1500, 8),
    new TextEncoder().encode("acme"),
  ];
  const out = encodeMessage({
    exportTime: 0x6566f400,
    sequence: 7,
    domain: 42,
    templates: [T256],
    records: [{ templateId: 256, values }],
  });
  const unpadded = MESSAGE.replace(/\s+/g, "").replace("000a0048", "000a0045")
    .replace("0100001c", "01000019").replace(/000000$/, "");
  assert.deepEqual(out, hex(unpadded));
});

Deno.test("ipfix: round trip of a long variable field (3-byte length) and several records", () => {
  const long = new TextEncoder().encode("p".repeat(300));
  const records = [0, 1, 2].map((k) => ({
    templateId: 256,
    values: [hex("0a000001"), hex("0a000002"), unsignedBytes(k, 8), k === 1 ? long : hex("")],
  }));
  const bytes = encodeMessage({
    exportTime: 1,
    sequence: 0,
    domain: 1,
    templates: [T256],
    records,
  });
  const m = decodeMessage(bytes, new TemplateStore(), "a");
  assert.deepEqual(m.records.map((r) => r.values), records.map((r) => r.values));
});

Deno.test("ipfix: data before its template is counted, then read once the template came in an earlier message", () => {
  const store = new TemplateStore();
  const data = hex("000a 002c 00000001 00000000 0000002a" + DATA_SET);
  const before = decodeMessage(data, store, "x");
  assert.deepEqual([before.records.length, before.unknownSets], [0, [256]]);
  decodeMessage(hex(MESSAGE), store, "x");
  const after = decodeMessage(data, store, "x");
  assert.equal(after.records.length, 1);
  // Templates are the exporter's and the domain's own: another exporter's data stays unknown.
  assert.deepEqual(decodeMessage(data, store, "y").unknownSets, [256]);
});

Deno.test("ipfix: a template with no field withdraws it (RFC 7011 8.1)", () => {
  const store = new TemplateStore();
  decodeMessage(hex(MESSAGE), store, "x");
  decodeMessage(hex("000a 0018 00000001 00000000 0000002a 0002 0008 0100 0000"), store, "x");
  assert.equal(store.size, 0);
});

Deno.test("ipfix: an options template (set 3) has its scope count", () => {
  const m = decodeMessage(
    hex("000a 0022 00000001 00000000 00000001 0003 0012 0101 0002 0001 0095 0004 0029 0008"),
    new TemplateStore(),
    "x",
  );
  assert.deepEqual(m.templates, [{
    id: 257,
    scopeCount: 1,
    fields: [{ id: 149, length: 4 }, { id: 41, length: 8 }],
  }]);
});

Deno.test("ipfix: malformed messages are refused, saying what is wrong, and teach no template", () => {
  const cases: [string, string, RegExp][] = [
    ["short", "000a 0010 0000", /shorter than its header/],
    ["netflow v9", "0009" + MESSAGE.replace(/\s+/g, "").slice(4), /version 9 is not IPFIX/],
    ["length", MESSAGE.replace("0048", "0049"), /says 73 bytes but 72 arrived/],
    ["set overrun", MESSAGE.replace("0100 001c", "0100 0030"), /past the message's end/],
    ["reserved set", MESSAGE.replace("0100 001c", "0004 001c"), /set ID 4 is reserved/],
    ["template id", MESSAGE.replace("0100 0004", "00ff 0004"), /template ID 255 is reserved/],
    [
      "cut record",
      "000a 0042 00000001 00000000 0000002a" + TEMPLATE_SET +
      "0100 0016 0a000001 0a000002 0000000000000000 09 61",
      /a record of template 256 is cut/,
    ],
  ];
  for (const [name, text, error] of cases) {
    const store = new TemplateStore();
    assert.throws(() => decodeMessage(hex(text), store, "x"), (e) => {
      assert.ok(e instanceof IpfixError, name);
      assert.match(e.message, error, name);
      return true;
    });
    assert.equal(store.size, 0, `${name}: nothing learnt`);
  }
});

Deno.test("ipfix: the encoder refuses records that do not fit their template", () => {
  const m = (values: Uint8Array[], templateId = 256) => () =>
    encodeMessage({
      exportTime: 0,
      sequence: 0,
      domain: 0,
      templates: [T256],
      records: [{ templateId, values }],
    });
  assert.throws(m([hex("0a000001")]), /has 1 values for 4 fields/);
  assert.throws(
    m([hex("0a00"), hex("0a000002"), unsignedBytes(1, 8), hex("")]),
    /takes 4 bytes, not 2/,
  );
  assert.throws(m([], 300), /template 300, which the message does not carry/);
});
