import { invalidAt, KeygateError } from "../../errors/keygate-error.js";
import type { Clock } from "../../lib/clock.js";
import { nextScheduledRefill } from "../../lib/credit-refill.js";
import { hashKey } from "../../lib/hash.js";
import type { CreditCheck, WindowResult } from "../../storage/counter-interfaces.js";
import type { AnalyticsSinks } from "../analytics/events.js";
import type { Caller } from "../caller.js";
import { type KeySubject, type NoticeSink, UNHEARD } from "../notices.js";
import { type Observer, UNOBSERVED } from "../observer.js";
import { type PermissionQuery, PermissionQuerySyntaxError, parsePermissionQuery } from "../permissions/query.js";
import { ExceededNotices } from "../ratelimit/exceeded-notices.js";
import { decided, type KeyLimitCheck, type LimitCheck, type LimitDecision, type NamespaceLimitCheck } from "../ratelimit/limit-decision.js";
import type { Limiter, LimiterOutcome } from "../ratelimit/limiter.js";
import { recordRatelimitDecision } from "../ratelimit/ratelimit-events.js";
import { requireApi } from "../root-keys/permissions.js";
import { postCreditCrossings } from "./credit-notices.js";
import type { KeyView } from "./key-view.js";
import { limitsToApply } from "./requested-limits.js";
import type {
  KeyDenial,
  KeyDenialCode,
  KeyViewLookup,
  PendingKeySettler,
  RequestedLimit,
  ValidVerification,
  Verification,
  VerifyKeyInput,
  VerifyRequest,
} from "./verification.js";

const PARSED_QUERIES_KEPT = 1_000;

export interface VerificationServiceOptions {
  keys: KeyViewLookup;
  limiter: Limiter;
  /** Where every verification is recorded, and every decision of a namespace limit joined to one (the gateway's). */
  events: Pick<AnalyticsSinks, "verifications" | "ratelimits">;
  clock: Clock;
  observer?: Observer;
  /** Finds keys imported under another system's hash (keys.verifyKey's migrationId); none: such keys stay unknown. */
  pendingKeys?: PendingKeySettler;
  /** Where credit crossings and namespace windows exceeded are posted (webhooks); nowhere by default. */
  notices?: NoticeSink;
}

/**
 * The one verification path of keygate: keys.verifyKey and the gateway both call verify(). Checks run in the
 * order of docs/decisions.md#verification-order and the first failing one decides; the rate limits and the credits are
 * one atomic step, so a request that is denied consumes nothing anywhere.
 */
export class VerificationService {
  private readonly keys: KeyViewLookup;
  private readonly limiter: Limiter;
  private readonly events: Pick<AnalyticsSinks, "verifications" | "ratelimits">;
  private readonly clock: Clock;
  private readonly observer: Observer;
  private readonly pendingKeys: PendingKeySettler | undefined;
  private readonly notices: NoticeSink;
  private readonly exceeded: ExceededNotices;
  /** Permission query texts of keys.verifyKey, parsed: clients send the same few over and over. */
  private readonly parsedQueries = new Map<string, PermissionQuery>();

  constructor(options: VerificationServiceOptions) {
    this.keys = options.keys;
    this.limiter = options.limiter;
    this.events = options.events;
    this.clock = options.clock;
    this.observer = options.observer ?? UNOBSERVED;
    this.pendingKeys = options.pendingKeys;
    this.notices = options.notices ?? UNHEARD;
    this.exceeded = new ExceededNotices(this.notices);
  }

  /**
   * keys.verifyKey for a root key. A root key that may verify no API at all is refused (403, as the hosted service does);
   * one that may verify other APIs than the key's gets NOT_FOUND, so it cannot learn that the key exists.
   */
  async verifyKey(caller: Caller, input: VerifyKeyInput, requestId: string, clientAddress?: string): Promise<Verification> {
    if (!caller.holdsAny(grantsSomeVerification)) caller.authorize(requireApi("verify_key"));
    for (const [index, limit] of (input.ratelimits ?? NO_REQUESTED_LIMITS).entries()) {
      if ((limit.limit === undefined) !== (limit.duration === undefined)) {
        const missing = limit.limit === undefined ? "limit" : "duration";
        throw invalidAt(
          `body.ratelimits[${index}].${missing}`,
          "is required when a custom limit is given (limit and duration go together)",
          "give both limit and duration, or neither to use the key's configured limit",
        );
      }
    }
    const request: VerifyRequest = {
      requestId,
      source: "api",
      workspaceId: caller.workspaceId,
      key: input.key,
      mayVerify: (apiId) => caller.can(requireApi("verify_key", apiId)),
    };
    // Each optional field is set only when given (a spread here would cost every verification microseconds).
    if (input.tags !== undefined) request.tags = input.tags;
    if (input.permissions !== undefined) request.permissions = input.permissions;
    if (input.credits !== undefined) request.credits = input.credits;
    if (input.ratelimits !== undefined) request.ratelimits = input.ratelimits;
    if (input.migrationId !== undefined) request.migrationId = input.migrationId;
    if (clientAddress !== undefined) request.clientAddress = clientAddress;
    return this.verify(request);
  }

  /** Verifies, and records the verification for analytics (off the response path: the sink only queues it). */
  async verify(request: VerifyRequest): Promise<Verification> {
    const startedAt = performance.now();
    const hash = hashKey(request.key);
    let view = await this.keys.find(request.workspaceId, hash);
    // A key imported under another system's hash: found by that system's scheme once, keygate's hash ever after.
    if (!view && request.migrationId !== undefined && this.pendingKeys) {
      if (await this.pendingKeys.settle(request.workspaceId, request.migrationId, request.key, request.mayVerify)) {
        view = await this.keys.find(request.workspaceId, hash);
      }
    }
    return this.recorded(request, await this.decideFor(view, request), startedAt);
  }

  private recorded(request: VerifyRequest, verification: Verification, startedAt: number): Verification {
    const identity = verification.key?.identity;
    const outcome = verification.code;
    this.observer.verified(request.source, outcome);
    this.events.verifications.record({
      requestId: request.requestId,
      time: verification.decidedAt,
      workspaceId: request.workspaceId,
      keySpaceId: verification.key?.keySpaceId ?? "",
      keyId: verification.key?.keyId ?? "",
      identityId: identity?.id ?? "",
      externalId: identity?.externalId ?? "",
      outcome,
      tags: request.tags && request.tags.length > 0 ? [...request.tags] : [],
      spentCredits: verification.spentCredits,
      creditsSource: verification.spentCredits > 0 ? (verification.key?.creditsSource ?? "") : "",
      latencyMs: performance.now() - startedAt,
    });
    return verification;
  }

  /** The checks before the counters, in order; the counters (limits and credits) only when there is something to count. */
  private async decideFor(view: KeyView | null, request: VerifyRequest): Promise<Verification> {
    const now = this.clock.now();
    if (!view || (request.keyspaces && !acceptedBy(request.keyspaces, view)) || (request.mayVerify && !request.mayVerify(view.apiId))) {
      return { valid: false, code: "NOT_FOUND", limits: NO_DECISIONS, spentCredits: 0, decidedAt: now };
    }
    if (view.ipAllowlist && !view.ipAllowlist.allows(addressOf(request))) return decidedBeforeCounters(view, "FORBIDDEN", now);
    const query = typeof request.permissions === "string" ? this.parsedQuery(request.permissions) : request.permissions;
    if (!view.enabled) return decidedBeforeCounters(view, "DISABLED", now);
    if (view.expires !== undefined && view.expires <= now) return decidedBeforeCounters(view, "EXPIRED", now);
    if (query && !view.permissionSet.satisfies(query)) return decidedBeforeCounters(view, "INSUFFICIENT_PERMISSIONS", now);

    const keyLimits = limitsToApply(view, request.ratelimits ?? NO_REQUESTED_LIMITS);
    const extra = typeof request.extraLimits === "function" ? await request.extraLimits(view) : (request.extraLimits ?? NO_EXTRA_LIMITS);
    return this.count(view, request, keyLimits, extra, now);
  }

  /** Decides the limits and credits in one step on the counters, or VALID at once when there is nothing to count. */
  private async count(
    view: KeyView,
    request: VerifyRequest,
    keyLimits: readonly KeyLimitCheck[],
    extra: readonly NamespaceLimitCheck[],
    now: number,
  ): Promise<Verification> {
    const cost = request.credits?.cost ?? (view.hasCredits ? 1 : 0);
    let credit: CreditCheck | undefined;
    if (view.hasCredits) {
      credit = { keyId: view.keyId, cost };
      // The identity's balance pays for a key without one of its own (docs/decisions.md#identity-credits).
      if (view.creditsSource === "identity" && view.identity) credit.identityId = view.identity.id;
    }
    // Nothing to count: the most common verification answers without touching the counters.
    if (keyLimits.length === 0 && extra.length === 0 && !credit) return decidedBeforeCounters(view, "VALID", now);

    const limits: readonly LimitCheck[] = extra.length === 0 ? keyLimits : [...keyLimits, ...extra];
    const startedAt = performance.now();
    const source = request.source === "gateway" ? "gateway" : "key";
    const outcome = await this.limiter.checkAndConsume(
      view.workspaceId,
      limits.map((limit) => limit.check),
      { source, credit },
    );
    const latencyMs = performance.now() - startedAt;
    const decisions = limits.map((limit, index) => decided(limit, outcome.results[index] as WindowResult));
    // Only the namespace limits are rate limit events; the key's own limits are part of the verification's event.
    if (extra.length > 0) {
      const call = { requestId: request.requestId, workspaceId: view.workspaceId, time: outcome.now, latencyMs };
      recordRatelimitDecision(this.events.ratelimits, call, decisions);
      // A notice posted is durable before the answer (docs/webhooks.md#what-survives-a-crash); the rare request that
      // posts one waits for its outbox write, every other one for nothing.
      if (!outcome.passed) {
        const exceeded = this.exceeded.note(view.workspaceId, decisions, keySubject(view));
        if (exceeded !== undefined) await exceeded;
      }
    }
    const verification = counted(view, decisions, credit, outcome);
    // Only a verification that spent can cross; a denial spent nothing.
    if (verification.valid && verification.credits !== undefined) {
      const crossed = postCreditCrossings(this.notices, view, verification.spentCredits, verification.credits);
      if (crossed !== undefined) await crossed;
    }
    return verification;
  }

  /** A query text parsed once; at most PARSED_QUERIES_KEPT are kept (all dropped when full: a flood of distinct texts). */
  private parsedQuery(text: string): PermissionQuery {
    let query = this.parsedQueries.get(text);
    if (query === undefined) {
      query = parseQuery(text);
      if (this.parsedQueries.size >= PARSED_QUERIES_KEPT) this.parsedQueries.clear();
      this.parsedQueries.set(text, query);
    }
    return query;
  }
}

/**
 * The verification of a key whose limits and credits the counters decided. Its objects are written out rather than
 * spread together: on the request path, an object literal that adds properties after a spread costs microseconds.
 */
function counted(view: KeyView, limits: readonly LimitDecision[], credit: CreditCheck | undefined, outcome: LimiterOutcome): Verification {
  const rateLimited = !limits.every((limit) => limit.passed);
  const balance = outcome.credit?.remaining;
  const decidedAt = outcome.now;
  let verification: Verification;
  if (rateLimited) verification = { valid: false, code: "RATE_LIMITED", key: view, limits, spentCredits: 0, decidedAt };
  else {
    const answered: ValidVerification | KeyDenial =
      outcome.credit !== undefined && !outcome.credit.passed
        ? { valid: false, code: "USAGE_EXCEEDED", key: view, limits, spentCredits: 0, decidedAt }
        : { valid: true, code: "VALID", key: view, limits, spentCredits: credit && balance !== null ? credit.cost : 0, decidedAt };
    // The balance is shown once the limits passed: a denial by a limit may come from this instance's fast path,
    // which never reads the balance, so showing it only sometimes would make the field depend on the path taken.
    if (balance !== undefined && balance !== null) {
      answered.credits = balance;
      if (view.creditsSource !== undefined) answered.creditsSource = view.creditsSource;
    }
    if (!answered.valid && view.creditRefill) answered.nextRefillAt = nextScheduledRefill(view.creditRefill, decidedAt);
    verification = answered;
  }
  if (outcome.degraded) verification.degraded = outcome.degraded;
  return verification;
}

const NO_REQUESTED_LIMITS: readonly RequestedLimit[] = [];
const NO_EXTRA_LIMITS: readonly NamespaceLimitCheck[] = [];
const NO_DECISIONS: readonly LimitDecision[] = [];

/**
 * A verification of an existing key decided without the counters: it failed a check before the limits (DISABLED,
 * EXPIRED, INSUFFICIENT_PERMISSIONS), or it is VALID with no limit and no credits to count.
 */
function decidedBeforeCounters(view: KeyView, code: KeyDenialCode | "VALID", now: number): Verification {
  return code === "VALID"
    ? { valid: true, code, key: view, limits: NO_DECISIONS, spentCredits: 0, decidedAt: now }
    : { valid: false, code, key: view, limits: NO_DECISIONS, spentCredits: 0, decidedAt: now };
}

/** Whether a key belongs to one of `keyspaces`, named by API id or key space id. */
function acceptedBy(keyspaces: ReadonlySet<string>, view: KeyView): boolean {
  return keyspaces.has(view.apiId) || keyspaces.has(view.keySpaceId);
}

function addressOf(request: VerifyRequest): string | undefined {
  return typeof request.clientAddress === "function" ? request.clientAddress() : request.clientAddress;
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
        errors: [
          {
            location: "body.permissions",
            message: error.message,
            fix: "write permission names joined by AND and OR, grouped with parentheses",
          },
        ],
      });
    }
    throw error;
  }
}

/** The key a verification was of, as a notice names it (a denial only: not on the allowed path). */
function keySubject(view: KeyView): KeySubject {
  const subject: KeySubject = { workspaceId: view.workspaceId, apiId: view.apiId, keyId: view.keyId };
  if (view.identity) {
    subject.identityId = view.identity.id;
    subject.externalId = view.identity.externalId;
  }
  return subject;
}
