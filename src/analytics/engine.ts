import type { AnalyticsQueryEngine } from "../domain/analytics/engine.js";
import type { VerificationEvent } from "../domain/analytics/events.js";

/** An analytics engine as keygate's infrastructure sees it: the domain's query port plus writing and lifecycle. */
export interface AnalyticsEngine extends AnalyticsQueryEngine {
  readonly kind: "embedded" | "clickhouse";
  /** Where the data lives, for the start-up banner (a directory, or a URL without its password). */
  readonly location: string;
  /** The engine's ClickHouse version, e.g. `26.7.2.1`. */
  version(): Promise<string>;
  /** Runs a statement of keygate's own (schema), with no result. */
  command(sql: string): Promise<void>;
  /** Appends the events to `key_verifications_v1`, one row each, with `region` in its column. */
  insert(events: readonly VerificationEvent[], region: string): Promise<void>;
  close(): Promise<void>;
}

export const RAW_TABLE_NAME = "key_verifications_v1";
