import { randomBytes } from "node:crypto";
import { KeygateError } from "../../errors/keygate-error.js";
import { base58Encode } from "../../lib/base58.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { hashKey } from "../../lib/hash.js";
import { newId } from "../../lib/ids.js";
import type { RootKeyStore } from "../../storage/interfaces.js";
import type { RootKeyRecord } from "../../storage/records.js";
import { type AuditEvent, type AuditTrail, created, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import type { CacheInvalidator } from "../invalidation.js";
import { PermissionSet } from "../permissions/permission-set.js";
import type { PermissionQuery } from "../permissions/query.js";
import { grantRequirement, normaliseRootPermission, requireRootKey } from "./permissions.js";

/** A root key given in the configuration or the environment: never stored, matched by hash. */
export interface ConfiguredRootKey {
  /** Either the plaintext or its base64 SHA-256. */
  key?: string;
  hash?: string;
  name?: string;
  workspaceId: string;
  permissions: readonly string[];
  expires?: number;
}

/** What a root key asks for when it creates another (keygate.createRootKey); the workspace is the caller's. */
export interface RootKeyRequest {
  permissions: string[];
  name?: string;
  expires?: number;
}

export interface NewRootKey {
  workspaceId: string;
  permissions: string[];
  name?: string;
  expires?: number;
}

const ROOT_KEY_PREFIX = "root";
const ROOT_KEY_BYTES = 32;

/**
 * Authenticates root keys (from configuration first, then the store), creates and revokes them for the CLI, and
 * for callers of the keygate.*RootKey procedures within their own workspace and permissions.
 */
export class RootKeyService {
  private readonly configured = new Map<string, RootKeyRecord>();
  /** One caller per record, reused while the record is (a caller holds nothing of a single request). */
  private readonly callers = new WeakMap<RootKeyRecord, RootKeyCaller>();

  private readonly store: RootKeyStore;
  private readonly invalidator: CacheInvalidator;
  private readonly clock: Clock;
  private readonly audit: AuditTrail;

  constructor(
    store: RootKeyStore,
    invalidator: CacheInvalidator,
    clock: Clock,
    configured: readonly ConfiguredRootKey[] = [],
    audit: AuditTrail = UNAUDITED,
  ) {
    this.store = store;
    this.invalidator = invalidator;
    this.clock = clock;
    this.audit = audit;
    configured.forEach((rootKey, index) => {
      const hash = rootKey.hash ?? hashKey(rootKey.key as string);
      this.configured.set(hash, {
        id: `config_root_key_${index}`,
        hash,
        workspaceId: rootKey.workspaceId,
        permissions: [...rootKey.permissions],
        ...defined({ name: rootKey.name, expires: rootKey.expires }),
        createdAt: 0,
      });
    });
  }

  get hasConfiguredKeys(): boolean {
    return this.configured.size > 0;
  }

  /** The caller behind a presented root key, or a 401 that says why not. */
  async authenticate(plaintext: string): Promise<Caller> {
    const hash = hashKey(plaintext);
    return this.accept(this.configured.get(hash) ?? (await this.store.findByHash(hash)));
  }

  /** The same for a root key known by its hash (a dashboard session keeps the hash, never the key). */
  async authenticateHash(hash: string): Promise<Caller> {
    return this.accept(this.configured.get(hash) ?? (await this.store.findByHash(hash)));
  }

  /** Whose a presented root key is, valid or not (revoked, expired): for the audit entry of a refused sign-in. */
  async identify(plaintext: string): Promise<{ id: string; workspaceId: string; name: string } | null> {
    const hash = hashKey(plaintext);
    const record = this.configured.get(hash) ?? (await this.store.findByHash(hash));
    return record ? { id: record.id, workspaceId: record.workspaceId, name: record.name ?? "" } : null;
  }

  private accept(record: RootKeyRecord | null): Caller {
    if (!record) throw unauthorized("The provided root key is invalid.");
    if (record.revokedAt !== undefined) throw unauthorized("The provided root key has been revoked.");
    if (record.expires !== undefined && record.expires <= this.clock.now()) throw unauthorized("The provided root key has expired.");
    return this.callerOf(record);
  }

  /** Creates and stores a root key; the plaintext is returned once and never kept. */
  async create(input: NewRootKey): Promise<{ id: string; key: string; record: RootKeyRecord }> {
    const key = `${ROOT_KEY_PREFIX}_${base58Encode(randomBytes(ROOT_KEY_BYTES))}`;
    const now = this.clock.now();
    const record: RootKeyRecord = {
      id: newId("key", now),
      hash: hashKey(key),
      workspaceId: input.workspaceId,
      permissions: [...input.permissions],
      createdAt: now,
      ...defined({ name: input.name, expires: input.expires }),
    };
    if (!(await this.store.create(record))) throw new Error("root key id or hash collision; try again");
    // An instance may have just been asked for this key and remember it as unknown.
    await this.invalidator.rootKeyChanged(record.hash);
    return { id: record.id, key, record };
  }

  list(workspaceId?: string): Promise<RootKeyRecord[]> {
    return this.store.list(workspaceId);
  }

  async revoke(id: string): Promise<RootKeyRecord | null> {
    const revoked = await this.store.revoke(id, this.clock.now());
    if (revoked) await this.invalidator.rootKeyChanged(revoked.hash);
    return revoked;
  }

  /**
   * The operator of this deployment acting in a workspace without a root key (the CLI, which reaches the stores
   * directly and so could do anything anyway): holds every permission there.
   */
  operator(workspaceId: string): Caller {
    return new RootKeyCaller({ id: "operator", hash: "", workspaceId, permissions: ["*"], createdAt: 0 });
  }

  /**
   * A root key created by another (keygate.createRootKey): in the caller's workspace, holding nothing the caller
   * does not hold itself. The first permission it may not grant is named in the 403.
   */
  async createFor(caller: Caller, request: RootKeyRequest): Promise<{ id: string; key: string; record: RootKeyRecord }> {
    caller.authorize(requireRootKey("create_root_key"));
    for (const permission of request.permissions) {
      if (!caller.can(grantRequirement(permission))) {
        throw new KeygateError(
          "err:unkey:authorization:insufficient_permissions",
          `A root key cannot grant a permission it does not hold: '${permission}'.`,
        );
      }
    }
    const made = await this.create({ ...request, workspaceId: caller.workspaceId });
    this.audit.record(caller, rootKeyCreated(made.record));
    return made;
  }

  /** The stored root keys of the caller's workspace, revoked ones included (configured keys are not stored). */
  listFor(caller: Caller): Promise<RootKeyRecord[]> {
    caller.authorize(requireRootKey("read_root_key"));
    return this.store.list(caller.workspaceId);
  }

  /** Revokes a stored root key of the caller's workspace; 404 for an unknown, revoked or other workspace's key. */
  async revokeFor(caller: Caller, id: string): Promise<void> {
    caller.authorize(requireRootKey("delete_root_key"));
    const owned = (await this.store.list(caller.workspaceId)).find((record) => record.id === id && record.revokedAt === undefined);
    if (!owned || !(await this.revoke(id))) {
      throw new KeygateError("err:keygate:data:root_key_not_found", `The root key '${id}' does not exist or was revoked.`);
    }
    this.audit.record(caller, {
      action: "rootKey.delete",
      description: `Revoked root key ${id}${owned.name === undefined ? "" : ` (${owned.name})`}`,
      resources: [{ type: "rootKey", id }],
    });
  }

  private callerOf(record: RootKeyRecord): RootKeyCaller {
    let caller = this.callers.get(record);
    if (!caller) {
      caller = new RootKeyCaller(record);
      this.callers.set(record, caller);
    }
    return caller;
  }
}

class RootKeyCaller implements Caller {
  readonly rootKeyId: string;
  readonly workspaceId: string;
  readonly rootKeyName: string;
  private readonly permissions: PermissionSet;
  private readonly held: readonly string[];

  constructor(record: RootKeyRecord) {
    this.rootKeyId = record.id;
    this.workspaceId = record.workspaceId;
    this.rootKeyName = record.name ?? "";
    this.held = record.permissions.map(normaliseRootPermission);
    this.permissions = new PermissionSet(this.held);
  }

  namedResourceIds(resourceType: string): string[] {
    const ids = new Set<string>();
    for (const permission of this.held) {
      const [type, id] = permission.split(".");
      if (type === resourceType && id !== undefined && id !== "*" && id !== "") ids.add(id);
    }
    return [...ids];
  }

  authorize(requirement: PermissionQuery): void {
    const missing = this.permissions.explainMissing(requirement);
    if (missing !== undefined) throw new KeygateError("err:unkey:authorization:insufficient_permissions", `${missing}.`);
  }

  can(requirement: PermissionQuery): boolean {
    return this.permissions.satisfies(requirement);
  }

  holdsAny(test: (permission: string) => boolean): boolean {
    return this.held.some(test);
  }
}

/** The audit event of a new root key: its name, permissions and expiry, never the key nor its hash. */
export function rootKeyCreated(record: RootKeyRecord): AuditEvent {
  return {
    action: "rootKey.create",
    description: `Created root key ${record.id}${record.name === undefined ? "" : ` (${record.name})`}`,
    resources: [{ type: "rootKey", id: record.id }],
    changes: created({ name: record.name, permissions: record.permissions, expires: record.expires }),
  };
}

function unauthorized(detail: string): KeygateError {
  return new KeygateError("err:unkey:authentication:key_not_found", detail);
}
