import type { EventSink, RatelimitEvent } from "../analytics/events.js";
import type { LimitDecision } from "./limit-decision.js";

/** One call of the counters, as its rate limit events are recorded. */
export interface RatelimitCall {
  requestId: string;
  workspaceId: string;
  /** Unix ms the counters decided at (the clock `resetAt` is on). */
  time: number;
  /** How long the counters took to decide. */
  latencyMs: number;
}

/**
 * Records one event per namespace limit of a call (ratelimit.limit, multiLimit, the gateway's namespace limits).
 * Each limit's own result is recorded: in an all-or-nothing batch that one limit denied, the others may have passed
 * though none was consumed. The key's own limits are part of its verification's event, not recorded here.
 */
export function recordRatelimitDecision(sink: EventSink<RatelimitEvent>, call: RatelimitCall, limits: readonly LimitDecision[]): void {
  for (const limit of limits) {
    if (limit.kind !== "namespace") continue;
    // Written out rather than spread from `call`: an object literal that adds properties after a spread costs
    // microseconds, and this runs for every decision whether analytics keeps it or not.
    sink.record({
      requestId: call.requestId,
      workspaceId: call.workspaceId,
      time: call.time,
      latencyMs: call.latencyMs,
      namespaceId: limit.namespaceId,
      identifier: limit.identifier,
      passed: limit.passed,
      overrideId: limit.overrideId ?? "",
      limit: limit.check.limit,
      remaining: limit.remaining,
      resetAt: limit.resetAt,
      tokens: limit.check.cost,
    });
  }
}
