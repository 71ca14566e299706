import assert from "node:assert/strict";
import { CniError, ifNameProblem } from "@knitter/plugin/contract";
import { type CniEnv, parseCniArgs, readCniEnv } from "./cni_env.ts";

const ADD_ENV: Record<string, string> = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "c0ffee",
  CNI_NETNS: "/var/run/netns/blue",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0",
  CNI_PATH: "/opt/cni/bin",
};

function read(vars: Record<string, string>): CniEnv {
  return readCniEnv((n) => vars[n]);
}

function rejects(vars: Record<string, string>): CniError {
  try {
    read(vars);
  } catch (e) {
    assert.ok(e instanceof CniError);
    assert.equal(e.code, 4);
    return e;
  }
  assert.fail("expected a CniError");
}

Deno.test("env: a complete ADD environment is read as is", () => {
  assert.deepEqual(read(ADD_ENV), {
    command: "ADD",
    containerId: "c0ffee",
    netns: "/var/run/netns/blue",
    ifName: "eth0",
    args: { K8S_POD_NAMESPACE: "ns", K8S_POD_NAME: "web-0" },
    path: "/opt/cni/bin",
  });
});

Deno.test("env: missing and unknown CNI_COMMAND are code 4", () => {
  assert.match(rejects({}).msg, /CNI_COMMAND/);
  const e = rejects({ CNI_COMMAND: "UP" });
  assert.match(e.details, /"UP" is not one of ADD, DEL/);
});

Deno.test("env: every missing variable is named at once", () => {
  const e = rejects({ CNI_COMMAND: "CHECK" });
  assert.equal(
    e.msg,
    "invalid or missing environment variables: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME",
  );
  assert.match(e.details, /CNI_NETNS is required for CHECK/);
});

Deno.test("env: DEL needs no netns; GC, STATUS and VERSION need nothing", () => {
  const del: Record<string, string> = { ...ADD_ENV, CNI_COMMAND: "DEL" };
  delete del.CNI_NETNS;
  assert.equal(read(del).netns, "");
  for (const c of ["GC", "STATUS", "VERSION"]) {
    assert.equal(read({ CNI_COMMAND: c }).command, c);
  }
  const e = rejects({ CNI_COMMAND: "DEL", CNI_NETNS: "/x" });
  assert.match(e.msg, /CNI_CONTAINERID, CNI_IFNAME$/);
});

Deno.test("env: container ID and interface name follow libcni's rules", () => {
  for (const id of ["-abc", "a/b", "a b", "a:b"]) {
    assert.deepEqual(
      rejects({ ...ADD_ENV, CNI_CONTAINERID: id }).msg.split(": ")[1],
      "CNI_CONTAINERID",
    );
  }
  for (const name of ["a23456789012345x", ".", "..", "a/b", "a:b", "a b", "a\tb"]) {
    assert.ok(ifNameProblem(name), name);
    rejects({ ...ADD_ENV, CNI_IFNAME: name });
  }
  assert.equal(ifNameProblem("a23456789012345"), undefined);
  assert.equal(
    read({ ...ADD_ENV, CNI_CONTAINERID: "cnitool-0a1b_2.c-3" }).containerId,
    "cnitool-0a1b_2.c-3",
  );
});

Deno.test("env: CNI_ARGS pairs, empty segments and bad pairs", () => {
  assert.deepEqual(parseCniArgs(""), {});
  assert.deepEqual(parseCniArgs("IgnoreUnknown=1;;A=b=c;"), { IgnoreUnknown: "1", A: "b=c" });
  assert.equal(typeof parseCniArgs("A=1;oops"), "string");
  assert.equal(typeof parseCniArgs("=1"), "string");
  assert.match(rejects({ ...ADD_ENV, CNI_ARGS: "K8S_POD_NAME" }).msg, /CNI_ARGS$/);
});
