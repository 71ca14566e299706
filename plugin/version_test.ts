import assert from "node:assert/strict";
import { versionReply } from "./version.ts";

Deno.test("version: echoes any asked version, else answers in 1.1.0", () => {
  const supportedVersions = ["0.4.0", "1.0.0", "1.1.0"];
  assert.deepEqual(JSON.parse(versionReply('{"cniVersion":"0.3.1"}')), {
    cniVersion: "0.3.1",
    supportedVersions,
  });
  for (const odd of ["", "null", "{", '{"cniVersion":1}', '{"cniVersion":""}']) {
    assert.deepEqual(
      JSON.parse(versionReply(odd)),
      { cniVersion: "1.1.0", supportedVersions },
      odd,
    );
  }
});
