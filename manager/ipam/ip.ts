/**
 * Addresses as IPAM uses them: the shared parser, `@knitter/common/address`, under its old path.
 * Import that instead; this file stays only until nothing imports it.
 */
export * from "@knitter/common/address";
