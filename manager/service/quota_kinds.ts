/** What a tenant's quota limits and counts, one number per kind. */
export const QUOTA_KINDS = [
  "networks",
  "ports",
  "addresses",
  "vlanIds",
  "vnis",
  "floatingIps",
] as const;
export type QuotaKind = typeof QUOTA_KINDS[number];
export type QuotaUsage = Record<QuotaKind, number>;
export type Limits = Partial<Record<QuotaKind, number>>;

export const ZERO: QuotaUsage = {
  networks: 0,
  ports: 0,
  addresses: 0,
  vlanIds: 0,
  vnis: 0,
  floatingIps: 0,
};
