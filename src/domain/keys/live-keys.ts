import { KeygateError } from "../../errors/keygate-error.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";

/** Finds keys the management API may act on: live keys of live APIs, in the caller's workspace. */
export class LiveKeys {
  private readonly keys: KeyStore;
  private readonly apis: ApiService;

  constructor(keys: KeyStore, apis: ApiService) {
    this.keys = keys;
    this.apis = apis;
  }

  /** A live key of the workspace: absent, deleted, other-workspace keys and keys of deleted APIs are all 404. */
  async find(workspaceId: string, keyId: string): Promise<KeyRecord> {
    const key = await this.keys.get(workspaceId, keyId);
    if (!key || !(await this.isLive(key))) throw keyNotFound(keyId);
    return key;
  }

  async isLive(key: KeyRecord): Promise<boolean> {
    return key.deletedAt === undefined && (await this.apis.isLive(key.workspaceId, key.apiId));
  }
}

export function keyNotFound(keyId: string): KeygateError {
  return new KeygateError("err:unkey:data:key_not_found", `The key '${keyId}' does not exist or has been deleted.`);
}
