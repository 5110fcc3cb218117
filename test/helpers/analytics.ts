import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AnalyticsEngine } from "../../src/analytics/analytics-engine.js";
import { type AnalyticsRuntime, disabledAnalytics } from "../../src/analytics/index.js";
import { VERIFICATIONS } from "../../src/analytics/rows.js";
import type { CreditRefundEvent, GatewayRequestEvent, RatelimitEvent, VerificationEvent } from "../../src/domain/analytics/events.js";
import type { Harness } from "./harness.js";

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
    creditsSource: "",
    latencyMs: 1,
    ...overrides,
  };
}

/** A refund of a verification's credits with plausible defaults; override what the test is about. */
export function creditRefundEvent(overrides: Partial<CreditRefundEvent> = {}): CreditRefundEvent {
  sequence++;
  const time = overrides.time ?? Date.now();
  return {
    requestId: `req_test${sequence}`,
    time,
    refundedAt: time + 1_000,
    workspaceId: "ws_test",
    keySpaceId: "ks_test",
    keyId: "key_test",
    identityId: "",
    externalId: "",
    credits: 1,
    creditsSource: "key",
    ...overrides,
  };
}

/** A rate limit decision event with plausible defaults; override what the test is about. */
export function ratelimitEvent(overrides: Partial<RatelimitEvent> = {}): RatelimitEvent {
  sequence++;
  const time = overrides.time ?? Date.now();
  return {
    requestId: `req_test${sequence}`,
    time,
    workspaceId: "ws_test",
    namespaceId: "rlns_test",
    identifier: "user_test",
    passed: true,
    latencyMs: 1,
    overrideId: "",
    limit: 10,
    remaining: 9,
    resetAt: time + 60_000,
    tokens: 1,
    ...overrides,
  };
}

/** A gateway request event with plausible defaults; override what the test is about. */
export function gatewayRequestEvent(overrides: Partial<GatewayRequestEvent> = {}): GatewayRequestEvent {
  sequence++;
  return {
    requestId: `req_test${sequence}`,
    time: Date.now(),
    workspaceId: "ws_test",
    apiId: "api_test",
    route: "orders",
    method: "GET",
    host: "api.example.com",
    path: "/v1/orders",
    queryString: "",
    responseStatus: 200,
    userAgent: "test-agent/1.0",
    ipAddress: "203.0.113.7",
    totalLatencyMs: 12,
    upstreamLatencyMs: 10,
    gatewayLatencyMs: 2,
    keyId: "key_test",
    outcome: "VALID",
    requestHeaders: [],
    responseHeaders: [],
    requestBody: "",
    responseBody: "",
    ...overrides,
  };
}

/**
 * gateway_requests_v1 as keygate created it before it recorded bodies. An installation that has it (a persisted
 * embedded engine, or a ClickHouse server) gets the new columns at its next start.
 */
export const GATEWAY_REQUESTS_BEFORE_BODIES = `CREATE TABLE IF NOT EXISTS keygate.gateway_requests_v1 (
  request_id String,
  time Int64 CODEC(Delta, ZSTD),
  workspace_id String,
  api_id String,
  app_id String,
  region LowCardinality(String),
  method LowCardinality(String),
  host String,
  path String,
  query_string String,
  request_headers Array(String),
  response_status Int32,
  response_headers Array(String),
  user_agent String,
  ip_address String,
  total_latency Float64,
  instance_latency Float64,
  gateway_latency Float64,
  key_id String,
  outcome LowCardinality(String)
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(time, 1000), 'UTC'))
ORDER BY (workspace_id, time, api_id, app_id)
TTL toDateTime(intDiv(time, 1000), 'UTC') + INTERVAL 90 DAY
SETTINGS ttl_only_drop_parts = 1`;

/** key_verifications_v1 as keygate created it before verifications recorded which balance paid (credits_source). */
export const VERIFICATIONS_BEFORE_CREDITS_SOURCE = `CREATE TABLE IF NOT EXISTS keygate.key_verifications_v1 (
  request_id String,
  time Int64 CODEC(Delta, ZSTD),
  workspace_id String,
  key_space_id String,
  identity_id String,
  external_id String,
  key_id String,
  region LowCardinality(String),
  outcome LowCardinality(String),
  tags Array(String),
  spent_credits Int64,
  latency Float64
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(time, 1000), 'UTC'))
ORDER BY (workspace_id, time, key_space_id)
TTL toDateTime(intDiv(time, 1000), 'UTC') + INTERVAL 90 DAY
SETTINGS ttl_only_drop_parts = 1`;

export type AnalyticsProcedure = "analytics.getVerifications" | "analytics.getRatelimits" | "analytics.getGatewayRequests";

/** The rows `procedure` answers for `query` (with `rootKey`, else the harness's); anything but a 200 throws. */
export async function analyticsRows(
  on: Harness,
  procedure: AnalyticsProcedure,
  query: string,
  rootKey?: string,
): Promise<Record<string, unknown>[]> {
  const result = await on.call(procedure, { query }, rootKey === undefined ? {} : { rootKey });
  if (result.status !== 200) throw new Error(`${query} → ${result.status} ${JSON.stringify(result.body)}`);
  return result.body.data;
}

/**
 * The example queries docs/api.md gives under `procedure`'s heading: the `kg <procedure> '{"query":…}'` lines and
 * the sql blocks, as a reader would copy them.
 */
export function documentedQueries(procedure: AnalyticsProcedure): string[] {
  const docs = readFileSync(new URL("../../../docs/api.md", import.meta.url), "utf8");
  const start = docs.indexOf(`### ${procedure}\n`);
  if (start < 0) throw new Error(`docs/api.md has no section ${procedure}`);
  const end = docs.indexOf("\n### ", start + 1);
  const section = docs.slice(start, end < 0 ? undefined : end);
  const shell = [...section.matchAll(new RegExp(`^kg ${procedure.replace(".", "\\.")} '(.*)'$`, "gm"))].map(
    (match) => JSON.parse((match[1] as string).replaceAll(`'"'"'`, "'")).query as string,
  );
  const sql = [...section.matchAll(/^```sql\n([\s\S]*?)^```$/gm)].map((match) => (match[1] as string).trim());
  return [...shell, ...sql];
}

/** How many of `events` fall under each value of `by`. */
export function tally<E>(events: readonly E[], by: (e: E) => string, weight: (e: E) => number = () => 1): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) counts[by(e)] = (counts[by(e)] ?? 0) + weight(e);
  return counts;
}

/** Answer rows as `{ [row[key]]: row[value] }`, to compare with a tally. */
export const asTally = (list: Record<string, unknown>[], key: string, value: string): Record<string, number> =>
  Object.fromEntries(list.map((row) => [String(row[key]), Number(row[value])]));

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
  creditRefunds?: CreditRefundEvent[];
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
      creditRefunds: { record: keep(into.creditRefunds) },
    },
  };
}
