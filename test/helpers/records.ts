import type { KeyRecord } from "../../src/storage/records.js";

/** A plain live key record of workspace ws_a and API api_1, for store tests; `fields` override any of it. */
export function keyRecord(id: string, fields: Partial<KeyRecord> = {}): KeyRecord {
  return {
    id,
    workspaceId: "ws_a",
    apiId: "api_1",
    keySpaceId: "ks_1",
    hash: `hash-${id}`,
    start: "abcd",
    byteLength: 16,
    enabled: true,
    permissionIds: [],
    roleIds: [],
    ratelimits: [],
    createdAt: 1,
    ...fields,
  };
}
