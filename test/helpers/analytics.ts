import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AnalyticsEngine } from "../../src/analytics/analytics-engine.js";
import { type AnalyticsRuntime, disabledAnalytics } from "../../src/analytics/index.js";
import { VERIFICATIONS } from "../../src/analytics/rows.js";
import type { GatewayRequestEvent, RatelimitEvent, VerificationEvent } from "../../src/domain/analytics/events.js";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A temporary data directory for an embedded engine, removed when the test ends. */
export function analyticsDir(t: Teardown): string {
  const path = mkdtempSync(join(tmpdir(), "keygate-analytics-test-"));
  t.teardown(() => rmSync(path, { recursive: true, force: true }));
  return path;
}

let sequence = 0;

/** A verification event with plausible defaults; override what the test is about. */
export function event(overrides: Partial<VerificationEvent> = {}): VerificationEvent {
  sequence++;
  return {
    requestId: `req_test${sequence}`,
    time: Date.now(),
    workspaceId: "ws_test",
    keySpaceId: "ks_test",
    keyId: "key_test",
    identityId: "",
    externalId: "",
    outcome: "VALID",
    tags: [],
    spentCredits: 0,
    latencyMs: 1,
    ...overrides,
  };
}

/** Writes `events` as one batch of `engine`, the way the pipeline does: made, filled, inserted, released. */
export async function insertEvents(engine: AnalyticsEngine, events: readonly VerificationEvent[], region: string): Promise<void> {
  const batch = engine.newBatch(VERIFICATIONS, region);
  try {
    for (const each of events) batch.add(each);
    await engine.insertBatch(batch);
  } finally {
    engine.releaseBatch(batch);
  }
}

/** Events kept by recordingAnalytics, by kind. */
export interface RecordedEvents {
  verifications?: VerificationEvent[];
  ratelimits?: RatelimitEvent[];
  gatewayRequests?: GatewayRequestEvent[];
}

/** Analytics without an engine whose sinks push every event into the arrays given (the others are dropped). */
export function recordingAnalytics(into: RecordedEvents): AnalyticsRuntime {
  const keep =
    <E>(list: E[] | undefined) =>
    (event: E) =>
      void list?.push(event);
  return {
    ...disabledAnalytics(),
    sinks: {
      verifications: { record: keep(into.verifications) },
      ratelimits: { record: keep(into.ratelimits) },
      gatewayRequests: { record: keep(into.gatewayRequests) },
    },
  };
}
