import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { hashKey } from "../../lib/hash.js";
import { newId } from "../../lib/ids.js";
import type { Vault } from "../../lib/vault.js";
import type { KeyStore } from "../../storage/interfaces.js";
import type { CreditRecord, IdentityRecord, KeyRecord } from "../../storage/records.js";
import type { ApiService } from "../apis/api-service.js";
import type { Caller } from "../caller.js";
import type { CacheInvalidator } from "../invalidation.js";
import { creditsAfterOperation, creditsAfterUpdate, creditsForNewKey, viewCredits, withRefills, type CreditsInput, type CreditsView } from "../credits.js";
import type { IdentityService, IdentityView } from "../identities/identity-service.js";
import { viewIdentity } from "../identities/identity-service.js";
import { checkMeta, MAX_KEY_META_BYTES } from "../meta.js";
import { replaceNamedLimits, viewNamedLimits, type NamedLimitInput, type NamedLimitView } from "../named-limits.js";
import { allOf } from "../permissions/query.js";
import { pagination, type Listed, type PermissionView, type RbacService, type RoleView } from "../rbac/rbac-service.js";
import { requireApi, requireRbac } from "../root-keys/permissions.js";

/** A key as the management API shows it (getKey, whoami, listKeys). Never the hash; the plaintext only on request. */
export interface KeyDetails {
  keyId: string;
  start: string;
  enabled: boolean;
  name?: string;
  meta?: Record<string, unknown>;
  createdAt: number;
  updatedAt?: number;
  expires?: number;
  permissions?: string[];
  roles?: string[];
  credits?: CreditsView;
  identity?: IdentityView;
  plaintext?: string;
  ratelimits?: NamedLimitView[];
}

export interface CreateKeyInput {
  apiId: string;
  prefix?: string;
  name?: string;
  byteLength: number;
  externalId?: string;
  meta?: Record<string, unknown>;
  roles?: string[];
  permissions?: string[];
  expires?: number;
  credits?: CreditsInput;
  ratelimits?: NamedLimitInput[];
  enabled: boolean;
  recoverable: boolean;
}

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

export interface KeyServiceDeps {
  keys: KeyStore;
  apis: ApiService;
  rbac: RbacService;
  identities: IdentityService;
  /** Absent when the operator configured no vault key: recoverable keys are then refused with 412. */
  vault: Vault | undefined;
  invalidator: CacheInvalidator;
  clock: Clock;
  generateKey: (prefix: string | undefined, byteLength: number) => { key: string; start: string };
}

const MS_PER_MINUTE = 60_000;

/** The keys.* procedures and apis.listKeys: issuing, reading, changing and revoking end-user keys. */
export class KeyService {
  private readonly deps: KeyServiceDeps;

  constructor(deps: KeyServiceDeps) {
    this.deps = deps;
  }

  async createKey(caller: Caller, input: CreateKeyInput): Promise<{ keyId: string; key: string }> {
    caller.authorize(requireApi("create_key", input.apiId));
    if (input.recoverable) caller.authorize(requireApi("encrypt_key", input.apiId));
    const workspaceId = caller.workspaceId;
    const api = await this.deps.apis.findLive(workspaceId, input.apiId);
    if (input.recoverable) this.requireVault("store recoverable keys");
    checkMeta(input.meta, MAX_KEY_META_BYTES, "body.meta");
    const now = this.deps.clock.now();
    const ratelimits = replaceNamedLimits([], input.ratelimits ?? [], "body.ratelimits", now);
    const credits = creditsForNewKey(input.credits, now);
    const roles = await this.deps.rbac.existingRoles(workspaceId, input.roles ?? []);
    const permissions = await this.deps.rbac.permissionsForSlugs(workspaceId, input.permissions ?? [], null);
    const identity = input.externalId === undefined ? undefined : await this.deps.identities.findOrCreate(workspaceId, input.externalId);

    const id = newId("key", now);
    const { key, start } = this.deps.generateKey(input.prefix, input.byteLength);
    const record: KeyRecord = {
      id,
      workspaceId,
      apiId: api.id,
      keySpaceId: api.keySpaceId,
      hash: hashKey(key),
      start,
      ...(input.prefix !== undefined ? { prefix: input.prefix } : {}),
      byteLength: input.byteLength,
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(identity ? { identityId: identity.id } : {}),
      ...(input.meta !== undefined ? { meta: input.meta } : {}),
      ...(input.expires !== undefined ? { expires: input.expires } : {}),
      enabled: input.enabled,
      permissionIds: permissions.map((p) => p.id),
      roleIds: roles.map((r) => r.id),
      ratelimits,
      ...(input.recoverable ? { encrypted: (this.deps.vault as Vault).encrypt(key, secretContext(workspaceId, id)) } : {}),
      createdAt: now,
    };
    if (!(await this.deps.keys.create(record, credits))) throw new Error("key id or hash collision; try again");
    // An instance may remember this hash as unknown from an earlier attempt; it is known now.
    await this.deps.invalidator.keyChanged(workspaceId, record.hash);
    return { keyId: id, key };
  }

  async getKey(caller: Caller, input: { keyId: string; decrypt: boolean }): Promise<KeyDetails> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("read_key", key.apiId));
    if (input.decrypt) this.authorizeDecrypt(caller, key.apiId);
    const [details] = await this.describe(caller.workspaceId, [key], input.decrypt);
    return details as KeyDetails;
  }

  /** The key behind a plaintext key, as getKey shows it. */
  async whoami(caller: Caller, input: { key: string }): Promise<KeyDetails> {
    const key = await this.deps.keys.findByHash(caller.workspaceId, hashKey(input.key));
    if (!key || !(await this.isLive(key))) throw new KeygateError("err:unkey:data:key_not_found", "The key does not exist or has been deleted.");
    caller.authorize(requireApi("read_key", key.apiId));
    const [details] = await this.describe(caller.workspaceId, [key], false);
    return details as KeyDetails;
  }

  async listKeys(caller: Caller, input: { apiId: string; limit: number; cursor?: string; externalId?: string; decrypt: boolean }): Promise<Listed<KeyDetails>> {
    caller.authorize(allOf(requireApi("read_key", input.apiId), requireApi("read_api", input.apiId)));
    if (input.decrypt) this.authorizeDecrypt(caller, input.apiId);
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
      ...(input.cursor !== undefined ? { cursor: input.cursor } : {}),
      ...(identityId !== undefined ? { identityId } : {}),
    });
    return { items: await this.describe(workspaceId, found.items, input.decrypt), pagination: pagination(found) };
  }

  async updateKey(caller: Caller, input: UpdateKeyInput): Promise<void> {
    const workspaceId = caller.workspaceId;
    const key = await this.findLiveKey(workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    checkMeta(input.meta, MAX_KEY_META_BYTES, "body.meta");
    // References are resolved before the atomic change, which must not wait on other reads.
    const roles = input.roles === undefined ? undefined : await this.deps.rbac.existingRoles(workspaceId, input.roles);
    const permissions = input.permissions === undefined ? undefined : await this.deps.rbac.permissionsForSlugs(workspaceId, input.permissions, null);
    let identity: IdentityRecord | null | undefined;
    if (input.externalId === null) identity = null;
    else if (input.externalId !== undefined) identity = await this.deps.identities.findOrCreate(workspaceId, input.externalId);
    const now = this.deps.clock.now();

    const updated = await this.deps.keys.update(workspaceId, key.id, (current, credits) => {
      if (current.deletedAt !== undefined) return { result: false };
      const next: KeyRecord = { ...current, updatedAt: now };
      setOrClear(next, "name", input.name);
      setOrClear(next, "meta", input.meta);
      setOrClear(next, "expires", input.expires);
      if (identity !== undefined) setOrClear(next, "identityId", identity === null ? null : identity.id);
      if (input.enabled !== undefined) next.enabled = input.enabled;
      if (input.ratelimits !== undefined) next.ratelimits = replaceNamedLimits(current.ratelimits, input.ratelimits, "body.ratelimits", now);
      if (roles) next.roleIds = roles.map((role) => role.id);
      if (permissions) next.permissionIds = permissions.map((permission) => permission.id);
      return {
        key: next,
        ...(input.credits !== undefined ? { credits: creditsAfterUpdate(credits, input.credits, now) } : {}),
        result: true,
      };
    });
    if (!updated) throw keyNotFound(input.keyId);
    await this.deps.invalidator.keyChanged(workspaceId, key.hash);
  }

  async updateCredits(caller: Caller, input: { keyId: string; operation: "set" | "increment" | "decrement"; value?: number | null }): Promise<CreditsView> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const now = this.deps.clock.now();
    const credits = await this.deps.keys.update(caller.workspaceId, key.id, (current, balance) => {
      if (current.deletedAt !== undefined) return { result: undefined };
      const next = creditsAfterOperation(balance, input.operation, input.value, now);
      return { credits: next, result: { balance: next } };
    });
    if (!credits) throw keyNotFound(input.keyId);
    await this.deps.invalidator.keyChanged(caller.workspaceId, key.hash);
    return viewCredits(credits.balance, now) ?? { remaining: null };
  }

  /**
   * Gives back credits a request spent when the upstream then failed (the gateway): one atomic increment in the
   * store, after due refills, however many requests spend and refund at the same time. A key that has meanwhile
   * become unlimited or was removed is left as it is.
   */
  async refundCredits(workspaceId: string, keyId: string, amount: number): Promise<void> {
    await this.deps.keys.refundCredits(workspaceId, keyId, amount, this.deps.clock.now());
  }

  /** Soft delete (the key stays on record, never verifies again) or, with `permanent`, removal for good. */
  async deleteKey(caller: Caller, input: { keyId: string; permanent: boolean }): Promise<void> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
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
    await this.deps.invalidator.keyChanged(caller.workspaceId, key.hash);
  }

  /**
   * A new key with the old one's settings (credits, identity, meta, expiry, key limits, roles, permissions,
   * recoverability). The old key expires `expiration` ms from now, rounded up to a whole minute (0: now), and
   * never later than it would have anyway.
   */
  async rerollKey(caller: Caller, input: { keyId: string; expiration: number }): Promise<{ keyId: string; key: string }> {
    const workspaceId = caller.workspaceId;
    const old = await this.findLiveKey(workspaceId, input.keyId);
    caller.authorize(requireApi("create_key", old.apiId));
    if (old.encrypted) {
      caller.authorize(requireApi("encrypt_key", old.apiId));
      this.requireVault("store recoverable keys");
    }
    const now = this.deps.clock.now();
    const id = newId("key", now);
    const { key, start } = this.deps.generateKey(old.prefix, old.byteLength);
    const { deletedAt: _deleted, updatedAt: _updated, encrypted, ...kept } = old;
    const record: KeyRecord = {
      ...kept,
      id,
      hash: hashKey(key),
      start,
      ratelimits: old.ratelimits.map((limit) => ({ ...limit, id: newId("rl", now) })),
      ...(encrypted ? { encrypted: (this.deps.vault as Vault).encrypt(key, secretContext(workspaceId, id)) } : {}),
      createdAt: now,
    };
    const oldCredits = await this.deps.keys.getCredits(workspaceId, old.id);
    const credits: CreditRecord | null = oldCredits ? withRefills(oldCredits, now) : null;
    if (!(await this.deps.keys.create(record, credits))) throw new Error("key id or hash collision; try again");

    const expiresAt = input.expiration === 0 ? now : Math.ceil((now + input.expiration) / MS_PER_MINUTE) * MS_PER_MINUTE;
    await this.deps.keys.update(workspaceId, old.id, (current) =>
      current.deletedAt !== undefined
        ? { result: undefined }
        : { key: { ...current, expires: Math.min(current.expires ?? Number.POSITIVE_INFINITY, expiresAt), updatedAt: now }, result: undefined },
    );
    await this.deps.invalidator.keyChanged(workspaceId, old.hash);
    await this.deps.invalidator.keyChanged(workspaceId, record.hash);
    return { keyId: id, key };
  }

  async addPermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_permission_to_key")));
    const added = await this.deps.rbac.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    return this.changeDirectPermissions(caller.workspaceId, key, (ids) => [...new Set([...ids, ...added.map((p) => p.id)])]);
  }

  async removePermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("remove_permission_from_key")));
    const removed = new Set((await this.deps.rbac.existingPermissions(caller.workspaceId, input.permissions)).map((p) => p.id));
    return this.changeDirectPermissions(caller.workspaceId, key, (ids) => ids.filter((id) => !removed.has(id)));
  }

  async setPermissions(caller: Caller, input: { keyId: string; permissions: string[] }): Promise<PermissionView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_permission_to_key"), requireRbac("remove_permission_from_key")));
    const permissions = await this.deps.rbac.permissionsForSlugs(caller.workspaceId, input.permissions, caller);
    return this.changeDirectPermissions(caller.workspaceId, key, () => permissions.map((p) => p.id));
  }

  async addRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(allOf(requireApi("update_key", key.apiId), requireRbac("add_role_to_key")));
    const added = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller.workspaceId, key, (ids) => [...new Set([...ids, ...added.map((r) => r.id)])]);
  }

  async removeRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const removed = new Set((await this.deps.rbac.existingRoles(caller.workspaceId, input.roles)).map((r) => r.id));
    return this.changeRoles(caller.workspaceId, key, (ids) => ids.filter((id) => !removed.has(id)));
  }

  async setRoles(caller: Caller, input: { keyId: string; roles: string[] }): Promise<RoleView[]> {
    const key = await this.findLiveKey(caller.workspaceId, input.keyId);
    caller.authorize(requireApi("update_key", key.apiId));
    const roles = await this.deps.rbac.existingRoles(caller.workspaceId, input.roles);
    return this.changeRoles(caller.workspaceId, key, () => roles.map((r) => r.id));
  }

  /** A live key of the workspace: absent, deleted, other-workspace keys and keys of deleted APIs are all 404. */
  private async findLiveKey(workspaceId: string, keyId: string): Promise<KeyRecord> {
    const key = await this.deps.keys.get(workspaceId, keyId);
    if (!key || !(await this.isLive(key))) throw keyNotFound(keyId);
    return key;
  }

  private async isLive(key: KeyRecord): Promise<boolean> {
    return key.deletedAt === undefined && (await this.deps.apis.isLive(key.workspaceId, key.apiId));
  }

  /** Replaces one of a live key's id lists (direct permissions or roles) atomically; answers the new list. */
  private async changeIdList(workspaceId: string, key: KeyRecord, field: "permissionIds" | "roleIds", change: (ids: string[]) => string[]): Promise<string[]> {
    const now = this.deps.clock.now();
    const ids = await this.deps.keys.update(workspaceId, key.id, (current) => {
      if (current.deletedAt !== undefined) return { result: null };
      const next = change(current[field]);
      return { key: { ...current, [field]: next, updatedAt: now }, result: next };
    });
    if (!ids) throw keyNotFound(key.id);
    await this.deps.invalidator.keyChanged(workspaceId, key.hash);
    return ids;
  }

  private async changeDirectPermissions(workspaceId: string, key: KeyRecord, change: (ids: string[]) => string[]): Promise<PermissionView[]> {
    return this.deps.rbac.viewPermissionsById(workspaceId, await this.changeIdList(workspaceId, key, "permissionIds", change));
  }

  private async changeRoles(workspaceId: string, key: KeyRecord, change: (ids: string[]) => string[]): Promise<RoleView[]> {
    const ids = await this.changeIdList(workspaceId, key, "roleIds", change);
    return this.deps.rbac.viewRoles(workspaceId, await this.deps.rbac.rolesById(workspaceId, ids));
  }

  private authorizeDecrypt(caller: Caller, apiId: string): void {
    caller.authorize(requireApi("decrypt_key", apiId));
    this.requireVault("decrypt keys");
  }

  private requireVault(purpose: string): void {
    if (!this.deps.vault) {
      throw new KeygateError("err:unkey:application:precondition_failed", `keygate has no vault key, so it cannot ${purpose}. The operator sets one with KEYGATE_VAULT_KEY or vault.key.`);
    }
  }

  /** Keys as the API shows them, reading their permissions, roles, identities and balances in batches. */
  private async describe(workspaceId: string, keys: readonly KeyRecord[], decrypt: boolean): Promise<KeyDetails[]> {
    const unique = (ids: string[]) => [...new Set(ids)];
    const [permissions, roles, identities, balances] = await Promise.all([
      this.deps.rbac.permissionsById(workspaceId, unique(keys.flatMap((key) => key.permissionIds))),
      this.deps.rbac.rolesById(workspaceId, unique(keys.flatMap((key) => key.roleIds))),
      this.deps.identities.liveById(workspaceId, unique(keys.flatMap((key) => (key.identityId ? [key.identityId] : [])))),
      this.deps.keys.getCreditsMany(workspaceId, keys.map((key) => key.id)),
    ]);
    const slugById = new Map(permissions.map((p) => [p.id, p.slug]));
    const roleNameById = new Map(roles.map((r) => [r.id, r.name]));
    const now = this.deps.clock.now();
    return keys.map((key) => {
      const slugs = key.permissionIds.map((id) => slugById.get(id)).filter((slug): slug is string => slug !== undefined);
      const roleNames = key.roleIds.map((id) => roleNameById.get(id)).filter((name): name is string => name !== undefined);
      const identity = key.identityId ? identities.get(key.identityId) : undefined;
      const credits = viewCredits(balances.get(key.id) ?? null, now);
      const ratelimits = viewNamedLimits(key.ratelimits);
      return {
        keyId: key.id,
        start: key.start,
        enabled: key.enabled,
        ...(key.name !== undefined ? { name: key.name } : {}),
        ...(key.meta !== undefined ? { meta: key.meta } : {}),
        createdAt: key.createdAt,
        ...(key.updatedAt !== undefined ? { updatedAt: key.updatedAt } : {}),
        ...(key.expires !== undefined ? { expires: key.expires } : {}),
        ...(slugs.length > 0 ? { permissions: slugs } : {}),
        ...(roleNames.length > 0 ? { roles: roleNames } : {}),
        ...(credits ? { credits } : {}),
        ...(identity ? { identity: viewIdentity(identity) } : {}),
        ...(decrypt && key.encrypted ? { plaintext: this.decrypt(key) } : {}),
        ...(ratelimits ? { ratelimits } : {}),
      };
    });
  }

  private decrypt(key: KeyRecord): string {
    try {
      return (this.deps.vault as Vault).decrypt(key.encrypted as NonNullable<KeyRecord["encrypted"]>, secretContext(key.workspaceId, key.id));
    } catch (error) {
      throw new KeygateError("err:unkey:application:precondition_failed", `The key '${key.id}' was encrypted under another vault key and cannot be decrypted with the configured one.`, { cause: error });
    }
  }
}

/** What a recoverable key's ciphertext is bound to, so it cannot be moved onto another key. */
function secretContext(workspaceId: string, keyId: string): string {
  return `${workspaceId}/${keyId}`;
}

function setOrClear<K extends "name" | "meta" | "expires" | "identityId">(record: KeyRecord, field: K, value: KeyRecord[K] | null | undefined): void {
  if (value === null) delete record[field];
  else if (value !== undefined) record[field] = value;
}

function keyNotFound(keyId: string): KeygateError {
  return new KeygateError("err:unkey:data:key_not_found", `The key '${keyId}' does not exist or has been deleted.`);
}
