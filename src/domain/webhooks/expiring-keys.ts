import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import type { ApiStore, IdentityStore, KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import type { WebhookStore } from "../../storage/webhook-interfaces.js";
import type { KeySubject, NoticeSink } from "../notices.js";

export interface ExpiringScanDeps {
  webhooks: WebhookStore;
  apis: ApiStore;
  keys: KeyStore;
  identities: IdentityStore;
  notices: NoticeSink;
  clock: Clock;
  /** How long before a key's expiry key.expiring is told. */
  leadMs: number;
}

const PAGE = 500;

/**
 * One pass of the key.expiring scan: in every workspace with an enabled endpoint subscribed to it, each live key
 * whose expiry falls within the lead time is told once (a claim per key and expiry, shared by every instance; a
 * changed expiry is told again). It reads every key of those workspaces, so a pass costs in proportion to their keys.
 */
export async function scanExpiringKeys(deps: ExpiringScanDeps): Promise<number> {
  let told = 0;
  for (const workspaceId of await deps.webhooks.workspaces()) {
    const endpoints = await deps.webhooks.list(workspaceId);
    if (!endpoints.some((endpoint) => endpoint.enabled && endpoint.events.includes("key.expiring"))) continue;
    for (const api of await deps.apis.list(workspaceId)) {
      if (api.deletedAt !== undefined) continue;
      let cursor: string | undefined;
      do {
        const page = await deps.keys.list(workspaceId, api.id, { limit: PAGE, ...defined({ cursor }) });
        for (const key of page.items) if (await tell(deps, key)) told += 1;
        cursor = page.nextCursor;
      } while (cursor !== undefined);
    }
  }
  return told;
}

async function tell(deps: ExpiringScanDeps, key: KeyRecord): Promise<boolean> {
  const now = deps.clock.now();
  const expires = key.expires;
  if (expires === undefined || key.deletedAt !== undefined || expires <= now || expires > now + deps.leadMs) return false;
  if (!(await deps.webhooks.claim(key.workspaceId, `expiring:${key.id}:${expires}`, expires - now + deps.leadMs))) return false;
  const subject: KeySubject = { workspaceId: key.workspaceId, apiId: key.apiId, keyId: key.id };
  if (key.identityId !== undefined) {
    subject.identityId = key.identityId;
    const identity = await deps.identities.get(key.workspaceId, key.identityId);
    if (identity) subject.externalId = identity.externalId;
  }
  deps.notices.post({ type: "key.expiring", subject, expires });
  return true;
}
