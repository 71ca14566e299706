/**
 * deploy: the manifests as data and the node binaries' build targets. See README.md.
 * @module
 */
export { BINARIES, type Binary, compileArgs } from "./binaries.ts";
export { build, BuildError } from "./build.ts";
export { findObject, loadManifests, type Manifest } from "./manifests.ts";
export { makeSecrets } from "./make_secrets.ts";
