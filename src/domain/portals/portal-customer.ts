import { invalidAt } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { defined } from "../../lib/defined.js";
import type { IdentityStore, KeyStore } from "../../storage/interfaces.js";
import type { KeyRecord } from "../../storage/records.js";
import type { AnalyticsService } from "../analytics/analytics-service.js";
import type { IssuedKey, KeyDetails, KeyService } from "../keys/key-service.js";
import { keyNotFound } from "../keys/live-keys.js";
import type { Listed } from "../pagination.js";
import { requireApi } from "../root-keys/permissions.js";
import { PortalCaller } from "./portal-caller.js";
import type { PortalContext } from "./portal-sessions.js";
import { type VerificationPoint, verificationSeries } from "./verification-series.js";

/** A key as the portal lists it: the key's details, when it last verified and how often this month (with analytics on). */
export interface PortalKey extends KeyDetails {
  lastUsed?: number;
  verifications?: number;
}

/** Keys read per page of the store while gathering a customer's keys. */
const PAGE = 100;
/** A customer's keys read for a usage query, at most. */
const MAX_KEYS = 1_000;
const KEY_ID = /^key_[1-9A-HJ-NP-Za-km-z]+$/;
const MAX_WINDOW_MS = 366 * 24 * 60 * 60_000;

/**
 * What a customer does in the portal, always as their session's Caller (holding only what its scopes stand for, on
 * the portal's APIs) and only on their own keys (those of their externalId's identity in the portal's APIs): the
 * key service and the analytics service do the work, and check the Caller as they check a root key.
 */
export class PortalCustomerService {
  private readonly keyService: KeyService;
  private readonly keys: KeyStore;
  private readonly identities: IdentityStore;
  private readonly analytics: AnalyticsService;
  private readonly clock: Clock;

  constructor(options: { keyService: KeyService; keys: KeyStore; identities: IdentityStore; analytics: AnalyticsService; clock: Clock }) {
    this.keyService = options.keyService;
    this.keys = options.keys;
    this.identities = options.identities;
    this.analytics = options.analytics;
    this.clock = options.clock;
  }

  /** portal.listKeys: the customer's keys, API after API (the cursor is `<apiId>:<cursor within it>`). */
  async listKeys(context: PortalContext, input: { limit: number; cursor?: string }): Promise<Listed<PortalKey>> {
    const { apiIds } = context;
    const [cursorApi, ...rest] = (input.cursor ?? "").split(":");
    const startAt = input.cursor === undefined ? 0 : apiIds.indexOf(cursorApi as string);
    const innerCursor = rest.join(":");
    const items: PortalKey[] = [];
    for (let index = Math.max(0, startAt); index < apiIds.length && items.length < input.limit; index++) {
      const apiId = apiIds[index] as string;
      const page = await this.keyService.listKeys(context.caller, {
        apiId,
        limit: input.limit - items.length,
        externalId: context.session.externalId,
        decrypt: false,
        ...defined({ cursor: index === startAt && innerCursor !== "" ? innerCursor : undefined }),
      });
      items.push(...page.items);
      if (page.pagination.hasMore)
        return { items: await this.withUsage(context, items), pagination: { cursor: `${apiId}:${page.pagination.cursor}`, hasMore: true } };
      const next = apiIds[index + 1];
      if (items.length >= input.limit && next !== undefined)
        return { items: await this.withUsage(context, items), pagination: { cursor: `${next}:`, hasMore: true } };
    }
    return { items: await this.withUsage(context, items), pagination: { hasMore: false } };
  }

  /** portal.rerollKey: another customer's key, or one outside the portal, is 404; keys:reroll is the session's 403. */
  async rerollKey(context: PortalContext, input: { keyId: string; expiration: number }): Promise<IssuedKey> {
    await this.ownKey(context, input.keyId);
    return this.keyService.rerollKey(context.caller, input);
  }

  /**
   * portal.createKey (keygate's; Unkey has no such route yet): a key for the customer with the portal's defaults
   * (prefix, length, limits, credits, permissions, roles) in the portal's API, or the one named among them.
   */
  async createKey(context: PortalContext, input: { name?: string; apiId?: string }): Promise<IssuedKey> {
    const apiId = input.apiId ?? (context.apiIds.length === 1 ? context.apiIds[0] : undefined);
    if (apiId === undefined || !context.apiIds.includes(apiId)) throw invalidAt("body.apiId", "must be one of the portal's APIs");
    const defaults = context.portal.keyDefaults ?? {};
    return this.keyService.createKey(context.caller, {
      apiId,
      byteLength: defaults.byteLength ?? 16,
      externalId: context.session.externalId,
      enabled: true,
      recoverable: false,
      ...defined({
        name: input.name,
        prefix: defaults.prefix,
        ratelimits: defaults.ratelimits,
        credits: defaults.credits,
        permissions: defaults.permissions,
        roles: defaults.roles,
      }),
    });
  }

  /** portal.getVerifications: the customer's verifications in zero-filled buckets, per outcome, and per key on request. */
  async getVerifications(
    context: PortalContext,
    input: { startTime: number; endTime: number; keyId?: string; byKey: boolean },
  ): Promise<VerificationPoint[]> {
    if (input.endTime <= input.startTime) throw invalidAt("body.endTime", "must be greater than startTime");
    if (input.endTime - input.startTime > MAX_WINDOW_MS) throw invalidAt("body.endTime", "must be at most 366 days after startTime");
    // The session's own check first: without analytics:read it may read nothing, not even zeros.
    for (const apiId of context.apiIds) context.caller.authorize(requireApi("read_analytics", apiId));
    const keyIds =
      input.keyId === undefined ? (await this.customerKeys(context)).map((key) => key.id) : [(await this.ownKey(context, input.keyId)).id];
    return verificationSeries((query) => this.analytics.getVerifications(context.caller, { query }), keyIds, input);
  }

  /** The customer's live key with this id in the portal's APIs; 404 otherwise, whoever else's it is. */
  private async ownKey(context: PortalContext, keyId: string): Promise<KeyRecord> {
    const [key, identity] = await Promise.all([
      this.keys.get(context.session.workspaceId, keyId),
      this.identities.findByExternalId(context.session.workspaceId, context.session.externalId),
    ]);
    if (!key || key.deletedAt !== undefined || !identity || key.identityId !== identity.id || !context.apiIds.includes(key.apiId))
      throw keyNotFound(keyId);
    return key;
  }

  /** The customer's live keys in the portal's APIs (up to MAX_KEYS). */
  private async customerKeys(context: PortalContext): Promise<KeyRecord[]> {
    const { workspaceId, externalId } = context.session;
    const identity = await this.identities.findByExternalId(workspaceId, externalId);
    if (!identity) return [];
    const found: KeyRecord[] = [];
    for (const apiId of context.apiIds) {
      let cursor: string | undefined;
      do {
        const page = await this.keys.list(workspaceId, apiId, { limit: PAGE, identityId: identity.id, ...defined({ cursor }) });
        found.push(...page.items.filter((key) => key.deletedAt === undefined));
        cursor = page.nextCursor;
      } while (cursor !== undefined && found.length < MAX_KEYS);
    }
    return found.slice(0, MAX_KEYS);
  }

  /**
   * Each key's last verification and this calendar month's count, from analytics when it is on. keygate's own query,
   * confined to these keys; a failure (analytics off, the quota spent) leaves the fields out rather than the list.
   */
  private async withUsage(context: PortalContext, items: PortalKey[]): Promise<PortalKey[]> {
    const keyIds = items.map((item) => item.keyId).filter((id) => KEY_ID.test(id));
    if (keyIds.length === 0) return items;
    const now = new Date(this.clock.now());
    const periodStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    const reader = new PortalCaller(context.session, ["analytics:read"], context.apiIds);
    const query =
      `SELECT key_id, max(time) AS last_used, countIf(time >= ${periodStart}) AS n FROM key_verifications_v1 ` +
      `WHERE key_id IN (${keyIds.map((id) => `'${id}'`).join(", ")}) GROUP BY key_id`;
    const rows = await this.analytics.getVerifications(reader, { query }).catch(() => []);
    const usage = new Map(rows.map((row) => [String(row.key_id), { lastUsed: Number(row.last_used), verifications: Number(row.n) }]));
    for (const item of items) {
      const used = usage.get(item.keyId);
      if (used) {
        item.lastUsed = used.lastUsed;
        item.verifications = used.verifications;
      }
    }
    return items;
  }
}
