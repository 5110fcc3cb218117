import { randomBytes } from "node:crypto";
import type { Vault } from "../../lib/vault.js";
import type { StoredWebhookSecret } from "../../storage/webhook-records.js";

const SECRET_BYTES = 32;

/**
 * Signing secrets: `whsec_` and the base64 of 32 random bytes, the form Standard Webhooks libraries take. keygate
 * must sign with them, so they cannot be hashed; with a vault key configured they are sealed under it (bound to the
 * endpoint), otherwise stored as they are (docs/webhooks.md says so).
 */
export class WebhookSecrets {
  private readonly vault: Vault | undefined;

  constructor(vault: Vault | undefined) {
    this.vault = vault;
  }

  generate(): string {
    return `whsec_${randomBytes(SECRET_BYTES).toString("base64")}`;
  }

  seal(secret: string, workspaceId: string, endpointId: string): StoredWebhookSecret {
    return this.vault ? { sealed: this.vault.encrypt(secret, context(workspaceId, endpointId)) } : { plain: secret };
  }

  /** Throws when the secret was sealed and no (or another) vault key is configured. */
  open(stored: StoredWebhookSecret, workspaceId: string, endpointId: string): string {
    if ("plain" in stored) return stored.plain;
    if (!this.vault) throw new Error("the webhook secret is sealed under a vault key and none is configured");
    return this.vault.decrypt(stored.sealed, context(workspaceId, endpointId));
  }
}

function context(workspaceId: string, endpointId: string): string {
  return `webhook:${workspaceId}:${endpointId}`;
}
