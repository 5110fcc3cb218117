import type { IdentityRecord, KeyRecord } from "../../storage/records.js";
import type { IdentityService } from "../identities/identity-service.js";
import type { KeyNotice, KeySubject, NoticeSink } from "../notices.js";

/**
 * Posts key.created, key.updated or key.deleted for a key, after its change is written. The identity is the one
 * given (known to the caller), or read when the key has one; nothing is read without a sink.
 */
export async function postKeyNotice(
  deps: { notices?: NoticeSink; identities: IdentityService },
  type: KeyNotice["type"],
  key: KeyRecord,
  identity?: IdentityRecord | null,
): Promise<void> {
  if (!deps.notices) return;
  const subject: KeySubject = { workspaceId: key.workspaceId, apiId: key.apiId, keyId: key.id };
  const known =
    identity === undefined && key.identityId !== undefined
      ? (await deps.identities.liveById(key.workspaceId, [key.identityId])).get(key.identityId)
      : identity;
  if (known) {
    subject.identityId = known.id;
    subject.externalId = known.externalId;
  } else if (key.identityId !== undefined && identity === undefined) subject.identityId = key.identityId;
  deps.notices.post({ type, subject });
}
