import { invalidAt, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { nextScheduledRefill } from "../../lib/credit-refill.js";
import { hashKey } from "../../lib/hash.js";
import type { CreditCheck, WindowCheck, WindowResult } from "../../storage/interfaces.js";
import type { RatelimitConfig } from "../../storage/records.js";
import type { VerificationEventSink, VerificationOutcome } from "../analytics/events.js";
import type { Caller } from "../caller.js";
import { parsePermissionQuery, PermissionQuerySyntaxError, type PermissionQuery } from "../permissions/query.js";
import type { Limiter } from "../ratelimit/limiter.js";
import { requireApi } from "../root-keys/permissions.js";
import type { KeyView } from "./key-view.js";

/** Outcome codes of a verification (api-decisions.md); analytics records the same codes. Every one but VALID is a denial. */
export type VerificationCode = VerificationOutcome;

export interface RequestedLimit {
  name: string;
  /** Units this request takes (default 1; 0 checks without consuming). */
  cost?: number;
  /** With `duration`: a limit of its own for this request, on the key, instead of a configured one. */
  limit?: number;
  duration?: number;
}

/** A limit decided together with the key's, all-or-nothing (the gateway's namespace limits). */
export interface ExtraLimit {
  name: string;
  check: WindowCheck;
  overrideId?: string;
}

export interface VerifyRequest {
  /** The request being served; analytics records the verification under it. */
  requestId: string;
  workspaceId: string;
  /** The key as presented. */
  key: string;
  /** Only keys of this API are found (the gateway's route); other keys are NOT_FOUND. */
  apiId?: string;
  /** Whether the caller may verify keys of an API (keys.verifyKey's root key); when not, the key is NOT_FOUND. */
  mayVerify?: (apiId: string) => boolean;
  /** A permission query: text is parsed only once the key is known to exist (a syntax error is then a 400). */
  permissions?: string | PermissionQuery;
  credits?: { cost: number };
  ratelimits?: readonly RequestedLimit[];
  /** Limits decided in the same step; a function when they depend on the key (the gateway's per-key identifiers). */
  extraLimits?: readonly ExtraLimit[] | ((key: KeyView) => Promise<readonly ExtraLimit[]>);
  /** Recorded with the verification for analytics. */
  tags?: readonly string[];
}

export interface LimitReport {
  /** `rl_…` of the configured limit; "" for a custom limit given in the request. */
  id: string;
  name: string;
  limit: number;
  duration: number;
  reset: number;
  remaining: number;
  exceeded: boolean;
  autoApply: boolean;
}

/** What keys.verifyKey answers (spec §2.5, reference §3): key fields only once the key is known to exist. */
export interface VerificationData {
  valid: boolean;
  code: VerificationCode;
  keyId?: string;
  name?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  /** The balance after this verification. */
  credits?: number;
  enabled?: boolean;
  permissions?: string[];
  roles?: string[];
  identity?: { id: string; externalId: string; meta?: Record<string, unknown>; ratelimits?: { id: string; name: string; limit: number; duration: number; autoApply: boolean }[] };
  ratelimits?: LimitReport[];
}

/** Everything a verification established, for its callers: the answer, and what the gateway and analytics need. */
export interface Verification {
  data: VerificationData;
  /** The key's view when it was found (NOT_FOUND: absent). */
  key?: KeyView;
  /** Each limit checked (key, identity and extra limits), in order, with its result. */
  limits: { name: string; limit: number; durationMs: number; result: WindowResult; overrideId?: string }[];
  /** Credits taken by this verification (0 when none). */
  spentCredits: number;
  /** Set when the counters could not be reached and ratelimit.fail decided instead. */
  degraded?: "open" | "local";
  /** Unix ms of the decision. */
  decidedAt: number;
  /** USAGE_EXCEEDED on a key whose balance refills: when it does next (unix ms). */
  nextRefillAt?: number;
}

/** keys.verifyKey's body (reference §2.1). */
export interface VerifyKeyInput {
  key: string;
  tags?: string[];
  permissions?: string;
  credits?: { cost: number };
  ratelimits?: RequestedLimit[];
  /** Accepted for compatibility: keygate holds no migrated keys, so it changes nothing. */
  migrationId?: string;
}

export interface KeyViewLookup {
  /** The view of the live key with this hash in the workspace, through the cache; null when there is none. */
  find(workspaceId: string, hash: string): Promise<KeyView | null>;
}

/**
 * The one verification path of keygate: keys.verifyKey and the gateway both call verify(). Checks run in the
 * order of api-decisions.md and the first failing one decides; the rate limits and the credits are one atomic
 * step, so a request that is denied consumes nothing anywhere.
 */
export class VerificationService {
  private readonly keys: KeyViewLookup;
  private readonly limiter: Limiter;
  private readonly events: VerificationEventSink;
  private readonly clock: Clock;

  constructor(keys: KeyViewLookup, limiter: Limiter, events: VerificationEventSink, clock: Clock) {
    this.keys = keys;
    this.limiter = limiter;
    this.events = events;
    this.clock = clock;
  }

  /**
   * keys.verifyKey for a root key. A root key that may verify no API at all is refused (403, as in Unkey S25);
   * one that may verify other APIs than the key's gets NOT_FOUND, so it cannot learn that the key exists.
   */
  async verifyKey(caller: Caller, input: VerifyKeyInput, requestId: string): Promise<Verification> {
    if (!caller.holdsAny(grantsSomeVerification)) caller.authorize(requireApi("verify_key"));
    (input.ratelimits ?? []).forEach((limit, index) => {
      if ((limit.limit === undefined) !== (limit.duration === undefined)) {
        const missing = limit.limit === undefined ? "limit" : "duration";
        throw invalidAt(`body.ratelimits[${index}].${missing}`, "is required when a custom limit is given (limit and duration go together)", "give both limit and duration, or neither to use the key's configured limit");
      }
    });
    return this.verify({
      requestId,
      workspaceId: caller.workspaceId,
      key: input.key,
      ...(input.tags !== undefined ? { tags: input.tags } : {}),
      mayVerify: (apiId) => caller.can(requireApi("verify_key", apiId)),
      ...(input.permissions !== undefined ? { permissions: input.permissions } : {}),
      ...(input.credits !== undefined ? { credits: input.credits } : {}),
      ...(input.ratelimits !== undefined ? { ratelimits: input.ratelimits } : {}),
    });
  }

  /** Verifies, and records the verification for analytics (off the response path: the sink only queues it). */
  async verify(request: VerifyRequest): Promise<Verification> {
    const startedAt = performance.now();
    const verification = await this.decide(request);
    const identity = verification.key?.identity;
    this.events.record({
      requestId: request.requestId,
      time: verification.decidedAt,
      workspaceId: request.workspaceId,
      keySpaceId: verification.key?.keySpaceId ?? "",
      keyId: verification.key?.keyId ?? "",
      identityId: identity?.id ?? "",
      externalId: identity?.externalId ?? "",
      outcome: verification.data.code,
      tags: [...(request.tags ?? [])],
      spentCredits: verification.spentCredits,
      latencyMs: performance.now() - startedAt,
    });
    return verification;
  }

  private async decide(request: VerifyRequest): Promise<Verification> {
    const view = await this.keys.find(request.workspaceId, hashKey(request.key));
    const now = this.clock.now();
    if (!view || (request.apiId !== undefined && view.apiId !== request.apiId) || (request.mayVerify && !request.mayVerify(view.apiId))) {
      return { data: { valid: false, code: "NOT_FOUND" }, limits: [], spentCredits: 0, decidedAt: now };
    }
    const query = typeof request.permissions === "string" ? parseQuery(request.permissions) : request.permissions;
    const denied = (code: VerificationCode): Verification => ({ data: { valid: false, code, ...describe(view) }, key: view, limits: [], spentCredits: 0, decidedAt: now });
    if (!view.enabled) return denied("DISABLED");
    if (view.expires !== undefined && view.expires <= now) return denied("EXPIRED");
    if (query && !view.permissionSet.satisfies(query)) return denied("INSUFFICIENT_PERMISSIONS");

    const keyLimits = limitsToApply(view, request.ratelimits ?? []);
    const extra = typeof request.extraLimits === "function" ? await request.extraLimits(view) : (request.extraLimits ?? []);
    const cost = request.credits?.cost ?? (view.hasCredits ? 1 : 0);
    const credit: CreditCheck | undefined = view.hasCredits ? { keyId: view.keyId, cost } : undefined;
    const checks = [...keyLimits.map((limit) => limit.check), ...extra.map((limit) => limit.check)];
    const outcome = checks.length === 0 && !credit ? undefined : await this.limiter.checkAndConsume(view.workspaceId, checks, credit);

    const results = outcome?.results ?? [];
    const reports: LimitReport[] = keyLimits.map((limit, index) => {
      const result = results[index] as WindowResult;
      return {
        id: limit.id,
        name: limit.name,
        limit: limit.check.limit,
        duration: limit.check.durationMs,
        reset: result.resetAt,
        remaining: result.remaining,
        exceeded: !result.passed,
        autoApply: limit.autoApply,
      };
    });
    const limits = [
      ...keyLimits.map((limit, index) => ({ name: limit.name, limit: limit.check.limit, durationMs: limit.check.durationMs, result: results[index] as WindowResult })),
      ...extra.map((limit, index) => ({
        name: limit.name,
        limit: limit.check.limit,
        durationMs: limit.check.durationMs,
        result: results[keyLimits.length + index] as WindowResult,
        ...(limit.overrideId !== undefined ? { overrideId: limit.overrideId } : {}),
      })),
    ];
    const rateLimited = results.some((result) => !result.passed);
    const creditDenied = outcome?.credit !== undefined && !outcome.credit.passed;
    const code: VerificationCode = rateLimited ? "RATE_LIMITED" : creditDenied ? "USAGE_EXCEEDED" : "VALID";
    const balance = outcome?.credit?.remaining;
    return {
      data: {
        valid: code === "VALID",
        code,
        ...describe(view),
        // The balance is shown once the limits passed: a denial by a limit may come from this instance's fast path,
        // which never reads the balance, so showing it only sometimes would make the field depend on the path taken.
        ...(balance !== undefined && balance !== null && !rateLimited ? { credits: balance } : {}),
        ...(reports.length > 0 ? { ratelimits: reports } : {}),
      },
      key: view,
      limits,
      spentCredits: code === "VALID" && credit && outcome?.credit?.remaining !== null ? credit.cost : 0,
      ...(outcome?.degraded ? { degraded: outcome.degraded } : {}),
      decidedAt: outcome?.now ?? now,
      ...(code === "USAGE_EXCEEDED" && view.creditRefill ? { nextRefillAt: nextScheduledRefill(view.creditRefill, outcome?.now ?? now) } : {}),
    };
  }
}

/** Whether a held root permission can grant `api.<some api>.verify_key`. */
function grantsSomeVerification(permission: string): boolean {
  return permission === "*" || permission === "api.*" || /^api\.[^.]+\.(verify_key|\*)$/.test(permission);
}

function parseQuery(text: string): PermissionQuery {
  try {
    return parsePermissionQuery(text);
  } catch (error) {
    if (error instanceof PermissionQuerySyntaxError) {
      throw new KeygateError("err:user:bad_request:permissions_query_syntax_error", `The permissions query is invalid: ${error.message}.`, {
        errors: [{ location: "body.permissions", message: error.message, fix: "write permission names joined by AND and OR, grouped with parentheses" }],
      });
    }
    throw error;
  }
}

/** The key's fields a verification shows once the key is known to exist. */
function describe(view: KeyView): Omit<VerificationData, "valid" | "code"> {
  const identityLimits = view.identity?.ratelimits.map(viewLimit) ?? [];
  return {
    keyId: view.keyId,
    ...(view.name !== undefined ? { name: view.name } : {}),
    ...(view.meta !== undefined ? { meta: view.meta } : {}),
    ...(view.expires !== undefined ? { expires: view.expires } : {}),
    enabled: view.enabled,
    ...(view.permissions.length > 0 ? { permissions: view.permissions } : {}),
    ...(view.roles.length > 0 ? { roles: view.roles } : {}),
    ...(view.identity
      ? {
          identity: {
            id: view.identity.id,
            externalId: view.identity.externalId,
            ...(view.identity.meta !== undefined ? { meta: view.identity.meta } : {}),
            ...(identityLimits.length > 0 ? { ratelimits: identityLimits } : {}),
          },
        }
      : {}),
  };
}

function viewLimit(limit: RatelimitConfig) {
  return { id: limit.id, name: limit.name, limit: limit.limit, duration: limit.durationMs, autoApply: limit.autoApply };
}

interface KeyLimit {
  id: string;
  name: string;
  autoApply: boolean;
  check: WindowCheck;
}

/**
 * The key's and identity's limits this verification applies: every autoApply limit, plus each requested one by
 * name (with its cost), or as a custom limit when the request gives limit and duration. A key limit wins over an
 * identity limit of the same name. Identity limits count per identity, so all its keys share them.
 */
function limitsToApply(view: KeyView, requested: readonly RequestedLimit[]): KeyLimit[] {
  const keyLimits = new Map(view.ratelimits.map((limit) => [limit.name, limit]));
  const identityLimits = new Map((view.identity?.ratelimits ?? []).map((limit) => [limit.name, limit]));
  const onKey = (limit: RatelimitConfig, cost: number): KeyLimit => ({
    id: limit.id,
    name: limit.name,
    autoApply: limit.autoApply,
    check: { bucket: `key:${view.keyId}:${limit.name}`, limit: limit.limit, durationMs: limit.durationMs, cost },
  });
  const onIdentity = (limit: RatelimitConfig, cost: number): KeyLimit => ({
    id: limit.id,
    name: limit.name,
    autoApply: limit.autoApply,
    check: { bucket: `identity:${view.identity?.id}:${limit.name}`, limit: limit.limit, durationMs: limit.durationMs, cost },
  });
  const configured = (name: string, cost: number): KeyLimit | undefined => {
    const keyLimit = keyLimits.get(name);
    if (keyLimit) return onKey(keyLimit, cost);
    const identityLimit = identityLimits.get(name);
    return identityLimit ? onIdentity(identityLimit, cost) : undefined;
  };

  const applied = new Map<string, KeyLimit>();
  for (const name of new Set([...keyLimits.keys(), ...identityLimits.keys()])) {
    const limit = configured(name, 1);
    if (limit?.autoApply) applied.set(name, limit);
  }
  for (const request of requested) {
    const cost = request.cost ?? 1;
    if (request.limit !== undefined && request.duration !== undefined) {
      applied.set(request.name, {
        id: "",
        name: request.name,
        autoApply: false,
        check: { bucket: `key:${view.keyId}:${request.name}`, limit: request.limit, durationMs: request.duration, cost },
      });
      continue;
    }
    const limit = configured(request.name, cost);
    if (!limit) {
      const where = view.identity ? `on key '${view.keyId}' nor on its identity '${view.identity.externalId}'` : `on key '${view.keyId}', which has no identity`;
      throw new KeygateError("err:unkey:application:precondition_failed", `The rate limit '${request.name}' was requested but is not configured ${where}.`);
    }
    applied.set(request.name, limit);
  }
  return [...applied.values()];
}
