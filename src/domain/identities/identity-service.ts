import { KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import { newId } from "../../lib/ids.js";
import type { IdentityStore } from "../../storage/interfaces.js";
import type { CreditRecord, IdentityRecord } from "../../storage/records.js";
import { type AuditChange, type AuditTrail, changesOf, created, UNAUDITED } from "../audit/audit-trail.js";
import type { Caller } from "../caller.js";
import {
  type CreditsInput,
  type CreditsView,
  creditsAfterOperation,
  creditsAfterUpdate,
  creditsForNewKey,
  viewCredits,
} from "../credits.js";
import type { CacheInvalidator } from "../invalidation.js";
import { checkMeta, MAX_IDENTITY_META_BYTES } from "../meta.js";
import { type NamedLimitInput, type NamedLimitView, replaceNamedLimits, viewNamedLimits } from "../named-limits.js";
import { type Listed, type ListInput, page, pagination } from "../pagination.js";
import { requireIdentity } from "../root-keys/permissions.js";

export interface IdentityView {
  id: string;
  externalId: string;
  meta?: Record<string, unknown>;
  ratelimits?: NamedLimitView[];
}

/** An identity as the identities.* procedures show it: with its credits (keygate's extension), when it has some. */
export interface IdentityDetails extends IdentityView {
  credits?: CreditsView;
}

export interface IdentityCreditsInput {
  identity: string;
  operation: "set" | "increment" | "decrement";
  value?: number | null;
}

/**
 * Identities group the keys of one owner (a user, an organisation) under the caller's `externalId`. Their named
 * rate limits are shared by all their keys. An identity is addressed by its id or its externalId.
 */
export class IdentityService {
  private readonly identities: IdentityStore;
  private readonly invalidator: CacheInvalidator;
  private readonly clock: Clock;
  private readonly audit: AuditTrail;

  constructor(identities: IdentityStore, invalidator: CacheInvalidator, clock: Clock, audit: AuditTrail = UNAUDITED) {
    this.identities = identities;
    this.invalidator = invalidator;
    this.clock = clock;
    this.audit = audit;
  }

  async createIdentity(
    caller: Caller,
    input: { externalId: string; meta?: Record<string, unknown>; ratelimits?: NamedLimitInput[]; credits?: CreditsInput },
  ): Promise<{ identityId: string }> {
    caller.authorize(requireIdentity("create_identity"));
    checkMeta(input.meta, MAX_IDENTITY_META_BYTES, "body.meta");
    const now = this.clock.now();
    const identity: IdentityRecord = {
      id: newId("id", now),
      workspaceId: caller.workspaceId,
      externalId: input.externalId,
      ...defined({ meta: input.meta }),
      ratelimits: replaceNamedLimits([], input.ratelimits ?? [], "body.ratelimits", now),
      createdAt: now,
    };
    if (!(await this.identities.create(identity, creditsForNewKey(input.credits, now)))) {
      throw new KeygateError(
        "err:unkey:data:identity_already_exists",
        `An identity with the externalId '${input.externalId}' already exists.`,
      );
    }
    const view = viewIdentity(identity);
    this.audit.record(caller, {
      action: "identity.create",
      description: `Created identity ${identity.id} (${identity.externalId})`,
      resources: [{ type: "identity", id: identity.id }],
      changes: created({ externalId: view.externalId, meta: view.meta, ratelimits: view.ratelimits, credits: input.credits }),
    });
    return { identityId: identity.id };
  }

  async getIdentity(caller: Caller, input: { identity: string }): Promise<IdentityDetails> {
    const identity = await this.findLive(caller.workspaceId, input.identity);
    caller.authorize(requireIdentity("read_identity", identity.id));
    return detailed(identity, await this.identities.getCredits(caller.workspaceId, identity.id), this.clock.now());
  }

  /** Every listed identity must be readable by the caller; one that is not makes the whole call a 403. */
  async listIdentities(caller: Caller, input: ListInput): Promise<Listed<IdentityDetails>> {
    const found = await this.identities.list(caller.workspaceId, page(input));
    for (const identity of found.items) caller.authorize(requireIdentity("read_identity", identity.id));
    if (found.items.length === 0) caller.authorize(requireIdentity("read_identity"));
    const credits = await this.identities.getCreditsMany(
      caller.workspaceId,
      found.items.map((identity) => identity.id),
    );
    const now = this.clock.now();
    return {
      items: found.items.map((identity) => detailed(identity, credits.get(identity.id) ?? null, now)),
      pagination: pagination(found),
    };
  }

  /**
   * Meta and rate limits change in one atomic step, the credits (three-state, as updateKey's) in a second one. Keys
   * cache which balance pays, so every instance forgets its views of the workspace's keys afterwards.
   */
  async updateIdentity(
    caller: Caller,
    input: { identity: string; meta?: Record<string, unknown>; ratelimits?: NamedLimitInput[]; credits?: CreditsInput | null },
  ): Promise<IdentityDetails> {
    const identity = await this.findLive(caller.workspaceId, input.identity);
    caller.authorize(requireIdentity("update_identity", identity.id));
    checkMeta(input.meta, MAX_IDENTITY_META_BYTES, "body.meta");
    const now = this.clock.now();
    // Credits are checked before anything is written (the change below checks them again on what it reads).
    if (input.credits !== undefined)
      creditsAfterUpdate(await this.identities.getCredits(caller.workspaceId, identity.id), input.credits, now, "identity");
    const updated = await this.identities.update(caller.workspaceId, identity.id, (current) => ({
      ...current,
      ...defined({
        meta: input.meta,
        ratelimits:
          input.ratelimits !== undefined ? replaceNamedLimits(current.ratelimits, input.ratelimits, "body.ratelimits", now) : undefined,
      }),
    }));
    if (!updated) throw identityNotFound(input.identity);
    let credits: CreditRecord | null;
    const changes: AuditChange[] = changesOf({ ...viewIdentity(identity) }, { ...viewIdentity(updated) }, ["meta", "ratelimits"]);
    if (input.credits === undefined) credits = await this.identities.getCredits(caller.workspaceId, identity.id);
    else {
      const changed = await this.identities.updateCredits(caller.workspaceId, identity.id, (_, current) => {
        const next = creditsAfterUpdate(current, input.credits as CreditsInput | null, now, "identity");
        return { credits: next, result: { next, before: current } };
      });
      if (!changed) throw identityNotFound(input.identity);
      credits = changed.next;
      changes.push(creditsChange(changed.before, changed.next, now));
    }
    this.audit.record(caller, {
      action: "identity.update",
      description: `Updated identity ${identity.id} (${identity.externalId})`,
      resources: [{ type: "identity", id: identity.id }],
      changes,
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
    return detailed(updated, credits, now);
  }

  /**
   * keygate.updateIdentityCredits: sets, increments or decrements the balance the identity's keys share, as
   * keys.updateCredits does a key's. Keys cache whether their identity pays, so a balance given or taken away
   * makes every instance forget its views of the workspace's keys; a changed amount needs nothing (it is read at
   * every spend).
   */
  async updateIdentityCredits(caller: Caller, input: IdentityCreditsInput): Promise<CreditsView> {
    const identity = await this.findLive(caller.workspaceId, input.identity);
    caller.authorize(requireIdentity("update_identity", identity.id));
    const now = this.clock.now();
    const changed = await this.identities.updateCredits(caller.workspaceId, identity.id, (_, current) => {
      const next = creditsAfterOperation(current, input.operation, input.value, now, "identity");
      return { credits: next, result: { next, before: current } };
    });
    if (!changed) throw identityNotFound(input.identity);
    this.audit.record(caller, {
      action: "identity.update",
      description: `Changed the credits of identity ${identity.id} (${input.operation})`,
      resources: [{ type: "identity", id: identity.id }],
      changes: [creditsChange(changed.before, changed.next, now)],
    });
    if ((changed.before !== null) !== (changed.next !== null)) await this.invalidator.workspaceChanged(caller.workspaceId);
    return viewCredits(changed.next, now) ?? { remaining: null };
  }

  /** The identity's balance, as stored (key views read it to know whether the identity pays). */
  creditsOf(workspaceId: string, identityId: string): Promise<CreditRecord | null> {
    return this.identities.getCredits(workspaceId, identityId);
  }

  /**
   * Gives credits back to the identity's balance, as KeyService.refundCredits does to a key's; false when the
   * identity has no balance (any more) and nothing was given back.
   */
  async refundCredits(workspaceId: string, identityId: string, amount: number): Promise<boolean> {
    return (await this.identities.refundCredits(workspaceId, identityId, amount, this.clock.now())) !== null;
  }

  /** Soft-deletes the identity; its externalId is free again at once, and its keys keep working without it. */
  async deleteIdentity(caller: Caller, input: { identity: string }): Promise<void> {
    const identity = await this.findLive(caller.workspaceId, input.identity);
    caller.authorize(requireIdentity("delete_identity", identity.id));
    if (!(await this.identities.markDeleted(caller.workspaceId, identity.id, this.clock.now()))) throw identityNotFound(input.identity);
    this.audit.record(caller, {
      action: "identity.delete",
      description: `Deleted identity ${identity.id} (${identity.externalId})`,
      resources: [{ type: "identity", id: identity.id }],
    });
    await this.invalidator.workspaceChanged(caller.workspaceId);
  }

  /** The live identity with this externalId, created when there is none (keys.createKey, updateKey). */
  async findOrCreate(workspaceId: string, externalId: string): Promise<IdentityRecord> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = await this.identities.findByExternalId(workspaceId, externalId);
      if (existing) return existing;
      const now = this.clock.now();
      const created: IdentityRecord = { id: newId("id", now), workspaceId, externalId, ratelimits: [], createdAt: now };
      if (await this.identities.create(created)) return created;
    }
    throw new Error(`could not find or create the identity '${externalId}'`);
  }

  /** Live identities by id; deleted or unknown ids are absent from the map. */
  async liveById(workspaceId: string, ids: readonly string[]): Promise<Map<string, IdentityRecord>> {
    const found = await this.identities.getMany(workspaceId, ids);
    return new Map(found.filter((identity) => identity.deletedAt === undefined).map((identity) => [identity.id, identity]));
  }

  /** The live identity with exactly this externalId, or null. */
  findByExternalId(workspaceId: string, externalId: string): Promise<IdentityRecord | null> {
    return this.identities.findByExternalId(workspaceId, externalId);
  }

  /** The live identity with this id or externalId, or null. */
  async find(workspaceId: string, idOrExternalId: string): Promise<IdentityRecord | null> {
    const byId = await this.identities.get(workspaceId, idOrExternalId);
    if (byId && byId.deletedAt === undefined) return byId;
    return this.identities.findByExternalId(workspaceId, idOrExternalId);
  }

  private async findLive(workspaceId: string, idOrExternalId: string): Promise<IdentityRecord> {
    const identity = await this.find(workspaceId, idOrExternalId);
    if (!identity) throw identityNotFound(idOrExternalId);
    return identity;
  }
}

export function viewIdentity(identity: IdentityRecord): IdentityView {
  const ratelimits = viewNamedLimits(identity.ratelimits);
  return {
    id: identity.id,
    externalId: identity.externalId,
    ...defined({ meta: identity.meta, ratelimits }),
  };
}

function detailed(identity: IdentityRecord, credits: CreditRecord | null, now: number): IdentityDetails {
  const view: IdentityDetails = viewIdentity(identity);
  const shown = viewCredits(credits, now);
  if (shown) view.credits = shown;
  return view;
}

function identityNotFound(what: string): KeygateError {
  return new KeygateError("err:unkey:data:identity_not_found", `The identity '${what}' does not exist.`);
}

/** A balance's change as the audit log shows it: the credits view before and after (null: none). */
function creditsChange(before: CreditRecord | null, after: CreditRecord | null, now: number): AuditChange {
  return { field: "credits", old: viewCredits(before, now) ?? null, new: viewCredits(after, now) ?? null };
}
