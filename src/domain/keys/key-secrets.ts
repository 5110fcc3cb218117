import { KeygateError } from "../../errors/keygate-error.js";
import type { Vault } from "../../lib/vault.js";
import type { KeyRecord } from "../../storage/records.js";
import type { Caller } from "../caller.js";
import { requireApi } from "../root-keys/permissions.js";

/**
 * Recoverable keys: the plaintext encrypted with the operator's vault key, bound to the key it belongs to. Without
 * a vault key every use is refused with 412 precondition_failed, saying how to configure one.
 */
export class KeySecrets {
  private readonly vault: Vault | undefined;

  constructor(vault: Vault | undefined) {
    this.vault = vault;
  }

  /** Throws unless a vault key is configured; `purpose` completes "keygate cannot …". */
  require(purpose: string): Vault {
    if (!this.vault) {
      throw new KeygateError(
        "err:unkey:application:precondition_failed",
        `keygate has no vault key, so it cannot ${purpose}. The operator sets one with KEYGATE_VAULT_KEY or vault.key.`,
      );
    }
    return this.vault;
  }

  /** The caller may see plaintexts of the API's keys, and there is a vault to decrypt them with. */
  authorizeDecrypt(caller: Caller, apiId: string): void {
    caller.authorize(requireApi("decrypt_key", apiId));
    this.require("decrypt keys");
  }

  encrypt(plaintext: string, workspaceId: string, keyId: string): NonNullable<KeyRecord["encrypted"]> {
    return this.require("store recoverable keys").encrypt(plaintext, secretContext(workspaceId, keyId));
  }

  decrypt(key: KeyRecord & { encrypted: NonNullable<KeyRecord["encrypted"]> }): string {
    const vault = this.require("decrypt keys");
    try {
      return vault.decrypt(key.encrypted, secretContext(key.workspaceId, key.id));
    } catch (error) {
      throw new KeygateError(
        "err:unkey:application:precondition_failed",
        `The key '${key.id}' was encrypted under another vault key and cannot be decrypted with the configured one.`,
        { cause: error },
      );
    }
  }
}

/** What a recoverable key's ciphertext is bound to, so it cannot be moved onto another key. */
function secretContext(workspaceId: string, keyId: string): string {
  return `${workspaceId}/${keyId}`;
}
