import assert from "node:assert/strict";
import {
  CNI_CODE,
  CniError,
  convertResult,
  ifNameProblem,
  isIfName,
  PLAIN_IFNAME_RE,
} from "./contract.ts";

const FULL = {
  cniVersion: "1.1.0",
  interfaces: [
    { name: "eth0", mac: "02:00:00:00:00:01", mtu: 1450, sandbox: "/var/run/netns/b" },
    { name: "vhost0", socketPath: "/run/vhost.sock", pciID: "0000:00:1f.6" },
  ],
  ips: [
    { address: "10.1.0.5/16", gateway: "10.1.0.1", interface: 0 },
    { address: "fd00::5/64", interface: 0 },
    { address: "::ffff:10.0.0.1/128" },
  ],
  routes: [
    {
      dst: "0.0.0.0/0",
      gw: "10.1.0.1",
      mtu: 1400,
      advmss: 1360,
      priority: 100,
      table: 5,
      scope: 0,
    },
  ],
  dns: { nameservers: ["10.1.0.1"], search: ["svc.cluster.local"] },
  extra: "kept",
};

Deno.test("result: 1.1.0 passes through with the config's cniVersion first", () => {
  const out = convertResult({ ...FULL, cniVersion: "9.9.9" }, "1.1.0");
  assert.deepEqual(out, FULL);
  assert.equal(Object.keys(out)[0], "cniVersion");
});

Deno.test("result: 1.0.0 drops the 1.1-only interface and route fields", () => {
  const out = convertResult(FULL, "1.0.0");
  assert.deepEqual(out, {
    ...FULL,
    cniVersion: "1.0.0",
    interfaces: [
      { name: "eth0", mac: "02:00:00:00:00:01", sandbox: "/var/run/netns/b" },
      { name: "vhost0" },
    ],
    routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
  });
});

Deno.test("result: 0.4.0 also labels each IP with its family", () => {
  const out = convertResult(FULL, "0.4.0");
  assert.equal(out.cniVersion, "0.4.0");
  assert.deepEqual(out.ips, [
    { address: "10.1.0.5/16", gateway: "10.1.0.1", interface: 0, version: "4" },
    { address: "fd00::5/64", interface: 0, version: "6" },
    { address: "::ffff:10.0.0.1/128", version: "6" },
  ]);
  assert.deepEqual(out.routes, [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }]);
});

Deno.test("result: conversion copies, and tolerates sparse or odd results", () => {
  convertResult(FULL, "0.4.0");
  assert.equal(FULL.interfaces[0].mtu, 1450);
  assert.deepEqual(convertResult({ cniVersion: "1.1.0" }, "0.4.0"), { cniVersion: "0.4.0" });
  assert.deepEqual(convertResult({ ips: [null, { gateway: "x" }], routes: "?" }, "0.4.0"), {
    cniVersion: "0.4.0",
    ips: [null, { gateway: "x" }],
    routes: "?",
  });
});

Deno.test("contract: interface names follow the kernel's rule, counted in bytes", () => {
  for (const name of ["", "a23456789012345x", "ééééééééé", ".", "..", "a/b", "a:b", "a b"]) {
    assert.ok(ifNameProblem(name), JSON.stringify(name));
    assert.equal(isIfName(name), false);
  }
  assert.match(ifNameProblem("a23456789012345x")!, /longer than 15 characters/);
  assert.match(ifNameProblem("ééééééééé")!, /longer than 15 bytes in UTF-8/);
  for (const name of ["eth0", "a23456789012345", "net-1.2_x", "é"]) {
    assert.equal(ifNameProblem(name), undefined, name);
  }
  // The plain rule knitter sets for its own inputs is narrower: no "@" or "é".
  assert.ok(PLAIN_IFNAME_RE.test("net-1.2_x"));
  for (const name of ["eth@0", "é", "a23456789012345x", ""]) {
    assert.equal(PLAIN_IFNAME_RE.test(name), false, name);
  }
});

Deno.test("contract: one CniError; its body has the given cniVersion, else the newest", () => {
  const e = new CniError(CNI_CODE.checkFailed, "m", "d");
  assert.equal(e.message, "m: d");
  assert.deepEqual(e.toBody(), { cniVersion: "1.1.0", code: 100, msg: "m", details: "d" });
  assert.deepEqual(new CniError(7, "bad").toBody("0.4.0"), {
    cniVersion: "0.4.0",
    code: 7,
    msg: "bad",
  });
});
