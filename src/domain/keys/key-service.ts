import { KeygateError } from "../../errors/keygate-error.js";
import { defined } from "../../lib/defined.js";
import { hashKey } from "../../lib/hash.js";
import type { CreditRecord, IdentityRecord, KeyRecord } from "../../storage/records.js";
import type { CreditRefundEvent, EventSink } from "../analytics/events.js";
import { UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import { type CreditsInput, type CreditsView, creditsAfterOperation, creditsAfterUpdate, viewCredits } from "../credits.js";
import { checkMeta, MAX_KEY_META_BYTES } from "../meta.js";
import { type NamedLimitInput, replaceNamedLimits } from "../named-limits.js";
import { type Listed, pagination } from "../pagination.js";
import { allOf } from "../permissions/query.js";
import { requireApi } from "../root-keys/permissions.js";
import { keyChanges } from "./key-audit.js";
import { describeKeys, type KeyDetails, type KeyDetailsDeps } from "./key-details.js";
import type { CreateKeyInput, IssuedKey, KeyIssuanceDeps } from "./key-issuance.js";
import * as issuance from "./key-issuance.js";
import { postKeyNotice } from "./key-notices.js";
import { keyNotFound } from "./live-keys.js";

export type { KeyDetails } from "./key-details.js";
export type { CreateKeyInput, IssuedKey } from "./key-issuance.js";

/** updateKey: an omitted field stays as it is, null clears it, a value sets it. */
export interface UpdateKeyInput {
  keyId: string;
  name?: string | null;
  externalId?: string | null;
  meta?: Record<string, unknown> | null;
  expires?: number | null;
  credits?: CreditsInput | null;
  ratelimits?: NamedLimitInput[];
  enabled?: boolean;
  roles?: string[];
  permissions?: string[];
}

/**
 * What KeyService needs: what issuing a key needs, what showing one does, and where refunds of credits are recorded
 * (analytics' credit_refunds_v1; nowhere without one).
 */
export type KeyServiceDeps = KeyIssuanceDeps & KeyDetailsDeps & { refunds?: EventSink<CreditRefundEvent> };

/**
 * The keys.* procedures and apis.listKeys that issue, read, change and revoke end-user keys. Issuing a new key
 * (createKey, rerollKey) is key-issuance.ts's; what a key may do (its permissions and roles) is KeyAccessService's;
 * how a key is shown, key-details.ts; recoverable keys, KeySecrets.
 */
export class KeyService {
  private readonly deps: KeyServiceDeps;

  constructor(deps: KeyServiceDeps) {
    this.deps = deps;
  }

  createKey(caller: Caller, input: CreateKeyInput): Promise<IssuedKey> {
    return issuance.createKey(this.deps, caller, input);
  }

  async getKey(caller: Caller, input: { keyId: string; decrypt: boolean }): Promise<KeyDetails> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("read_key", key.apiId));
    if (input.decrypt) this.deps.secrets.authorizeDecrypt(caller, key.apiId);
    const [details] = await this.describe(caller.workspaceId, [key], input.decrypt);
    if (input.decrypt) this.revealed(caller, key.encrypted === undefined ? [] : [key]);
    return details as KeyDetails;
  }

  /** The key behind a plaintext key, as getKey shows it. */
  async whoami(caller: Caller, input: { key: string }): Promise<KeyDetails> {
    const key = await this.deps.keys.findByHash(caller.workspaceId, hashKey(input.key));
    if (!key || !(await this.deps.live.isLive(key)))
      throw new KeygateError("err:unkey:data:key_not_found", "The key does not exist or has been deleted.");
    caller.authorize(requireApi("read_key", key.apiId));
    const [details] = await this.describe(caller.workspaceId, [key], false);
    return details as KeyDetails;
  }

  async listKeys(
    caller: Caller,
    input: { apiId: string; limit: number; cursor?: string; externalId?: string; decrypt: boolean },
  ): Promise<Listed<KeyDetails>> {
    caller.authorize(allOf(requireApi("read_key", input.apiId), requireApi("read_api", input.apiId)));
    if (input.decrypt) this.deps.secrets.authorizeDecrypt(caller, input.apiId);
    const workspaceId = caller.workspaceId;
    await this.deps.apis.findLive(workspaceId, input.apiId);
    let identityId: string | undefined;
    if (input.externalId !== undefined) {
      const identity = await this.deps.identities.findByExternalId(workspaceId, input.externalId);
      if (!identity) return { items: [], pagination: { hasMore: false } };
      identityId = identity.id;
    }
    const found = await this.deps.keys.list(workspaceId, input.apiId, {
      limit: input.limit,
      ...defined({ cursor: input.cursor, identityId }),
    });
    const items = await this.describe(workspaceId, found.items, input.decrypt);
    if (input.decrypt)
      this.revealed(
        caller,
        found.items.filter((key) => key.encrypted !== undefined),
      );
    return { items, pagination: pagination(found) };
  }

  async updateKey(caller: Caller, input: UpdateKeyInput): Promise<void> {
    const workspaceId = caller.workspaceId;
    const key = await this.deps.live.find(workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    checkMeta(input.meta, MAX_KEY_META_BYTES, "body.meta");
    // References are resolved before the atomic change, which must not wait on other reads.
    const roles = input.roles === undefined ? undefined : await this.deps.rbac.existingRoles(workspaceId, input.roles);
    const permissions =
      input.permissions === undefined ? undefined : await this.deps.rbac.permissionsForSlugs(workspaceId, input.permissions, null);
    let identity: IdentityRecord | null | undefined;
    if (input.externalId === null) identity = null;
    else if (input.externalId !== undefined) identity = await this.deps.identities.findOrCreate(workspaceId, input.externalId);
    const now = this.deps.clock.now();

    let before: { key: KeyRecord; credits: CreditRecord | null } | undefined;
    let after: { key: KeyRecord; credits: CreditRecord | null } | undefined;
    const updated = await this.deps.keys.update(workspaceId, key.id, (current, credits) => {
      if (current.deletedAt !== undefined) return { result: false };
      const next: KeyRecord = { ...current, updatedAt: now };
      setOrClear(next, "name", input.name);
      setOrClear(next, "meta", input.meta);
      setOrClear(next, "expires", input.expires);
      if (identity !== undefined) setOrClear(next, "identityId", identity === null ? null : identity.id);
      if (input.enabled !== undefined) next.enabled = input.enabled;
      if (input.ratelimits !== undefined)
        next.ratelimits = replaceNamedLimits(current.ratelimits, input.ratelimits, "body.ratelimits", now);
      if (roles) next.roleIds = roles.map((role) => role.id);
      if (permissions) next.permissionIds = permissions.map((permission) => permission.id);
      const nextCredits = input.credits !== undefined ? creditsAfterUpdate(credits, input.credits, now) : undefined;
      before = { key: current, credits };
      after = { key: next, credits: nextCredits === undefined ? credits : nextCredits };
      return { key: next, ...defined({ credits: nextCredits }), result: true };
    });
    if (!updated || !before || !after) throw keyNotFound(input.keyId);
    this.audit.record(caller, {
      action: "key.update",
      description: `Updated key ${key.id}`,
      resources: keyResources(key),
      changes: await keyChanges(this.deps, before, after, now),
    });
    await this.deps.invalidator.keyChanged(workspaceId, key.hash);
    await postKeyNotice(this.deps, "key.updated", key, identity);
  }

  async updateCredits(
    caller: Caller,
    input: { keyId: string; operation: "set" | "increment" | "decrement"; value?: number | null },
  ): Promise<CreditsView> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const now = this.deps.clock.now();
    const credits = await this.deps.keys.update(caller.workspaceId, key.id, (current, balance) => {
      if (current.deletedAt !== undefined) return { result: undefined };
      const next = creditsAfterOperation(balance, input.operation, input.value, now);
      return { credits: next, result: { before: balance, balance: next } };
    });
    if (!credits) throw keyNotFound(input.keyId);
    this.audit.record(caller, {
      action: "key.update",
      description: `Changed the credits of key ${key.id} (${input.operation})`,
      resources: keyResources(key),
      changes: [{ field: "credits", old: viewCredits(credits.before, now) ?? null, new: viewCredits(credits.balance, now) ?? null }],
    });
    await this.deps.invalidator.keyChanged(caller.workspaceId, key.hash);
    await postKeyNotice(this.deps, "key.updated", key);
    return viewCredits(credits.balance, now) ?? { remaining: null };
  }

  /**
   * Gives back credits a verification spent when the upstream then failed (the gateway): one atomic increment in
   * the store, after due refills, however many requests spend and refund at the same time, to the balance that paid
   * (`refund.creditsSource`). A key or identity that has meanwhile lost its balance (unlimited, removed) is left as
   * it is. A refund that was given back is recorded for analytics, so usage counts the credits as not spent; one
   * that was not is not, since those credits did leave the balance.
   */
  async refundCredits(refund: Omit<CreditRefundEvent, "refundedAt">): Promise<void> {
    const { workspaceId, keyId, identityId, credits } = refund;
    const refundedAt = this.deps.clock.now();
    const givenBack =
      refund.creditsSource === "identity"
        ? await this.deps.identities.refundCredits(workspaceId, identityId, credits)
        : (await this.deps.keys.refundCredits(workspaceId, keyId, credits, refundedAt)) !== null;
    if (givenBack) this.deps.refunds?.record({ ...refund, refundedAt });
  }

  /** Soft delete (the key stays on record, never verifies again) or, with `permanent`, removal for good. */
  /**
   * `keygate keys compact`: every key still kept in an earlier storage form is moved to the current one (the
   * operator's command, not a procedure). Keys verify the same throughout; returns how many moved.
   */
  upgradeStorage(progress?: (moved: number) => void): Promise<number> {
    return this.deps.keys.upgradeStorage(progress);
  }

  async deleteKey(caller: Caller, input: { keyId: string; permanent: boolean }): Promise<void> {
    const key = await this.deps.live.find(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("delete_key", key.apiId));
    if (input.permanent) {
      if (!(await this.deps.keys.remove(caller.workspaceId, key.id))) throw keyNotFound(input.keyId);
    } else {
      const now = this.deps.clock.now();
      const deleted = await this.deps.keys.update(caller.workspaceId, key.id, (current) =>
        current.deletedAt !== undefined ? { result: false } : { key: { ...current, deletedAt: now }, result: true },
      );
      if (!deleted) throw keyNotFound(input.keyId);
    }
    this.audit.record(caller, {
      action: "key.delete",
      description: `${input.permanent ? "Permanently deleted" : "Deleted"} key ${key.id}`,
      resources: keyResources(key),
    });
    await this.deps.invalidator.keyChanged(caller.workspaceId, key.hash);
    await postKeyNotice(this.deps, "key.deleted", key);
  }

  /** A new key with the old one's settings, the old one expiring `expiration` ms from now (key-issuance.ts says how). */
  rerollKey(caller: Caller, input: { keyId: string; expiration: number }): Promise<IssuedKey> {
    return issuance.rerollKey(this.deps, caller, input);
  }

  private get audit() {
    return this.deps.audit ?? UNAUDITED;
  }

  /** Plaintexts of recoverable keys were shown: one entry naming every key revealed. */
  private revealed(caller: Caller, keys: readonly KeyRecord[]): void {
    if (keys.length === 0) return;
    this.audit.record(caller, {
      action: "key.reveal",
      description: `Revealed the plaintext of ${keys.length === 1 ? `key ${keys[0]?.id}` : `${keys.length} keys`}`,
      resources: keys.flatMap(keyResources),
    });
  }

  private describe(workspaceId: string, keys: readonly KeyRecord[], decrypt: boolean): Promise<KeyDetails[]> {
    return describeKeys(this.deps, workspaceId, keys, decrypt);
  }
}

function keyResources(key: KeyRecord): { type: string; id: string }[] {
  return [
    { type: "key", id: key.id },
    { type: "api", id: key.apiId },
  ];
}

function setOrClear<K extends "name" | "meta" | "expires" | "identityId">(
  record: KeyRecord,
  field: K,
  value: KeyRecord[K] | null | undefined,
): void {
  if (value === null) delete record[field];
  else if (value !== undefined) record[field] = value;
}
