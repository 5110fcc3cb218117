import type { VerificationEvent } from "../domain/analytics/events.js";
import type { AnalyticsQueryEngine } from "../domain/analytics/query-engine.js";

/** An analytics engine as keygate's infrastructure sees it: the domain's query port plus writing and lifecycle. */
export interface AnalyticsEngine extends AnalyticsQueryEngine {
  readonly kind: "embedded" | "clickhouse";
  /** Where the data lives, for the start-up banner (a directory, or a URL without its password). */
  readonly location: string;
  /** The engine's ClickHouse version, e.g. `26.7.2.1`. */
  version(): Promise<string>;
  /** Runs a statement of keygate's own (schema), with no result. */
  command(sql: string): Promise<void>;
  /** An empty batch for events of `region`, in the form this engine writes; the pipeline fills it as they come. */
  newBatch(region: string): EventBatch;
  /** Appends a batch this engine made to `key_verifications_v1`, one row per event, with its region in its column. */
  insertBatch(batch: EventBatch): Promise<void>;
  /** The batch is done with (written, or given up): the engine may reuse its memory for a new one. */
  releaseBatch(batch: EventBatch): void;
  close(): Promise<void>;
}

export const RAW_TABLE_NAME = "key_verifications_v1";

/** Events gathered for one insert, held in the form the engine writes them in. */
export interface EventBatch {
  /** Events added so far. */
  readonly size: number;
  /** Adds one event; when it throws, the batch is as it was. */
  add(event: VerificationEvent): void;
}

/** Events kept as they came, for an engine that converts them when it writes (a ClickHouse server's JSON rows). */
export class EventList implements EventBatch {
  readonly events: VerificationEvent[] = [];
  readonly region: string;

  constructor(region: string) {
    this.region = region;
  }

  get size(): number {
    return this.events.length;
  }

  add(event: VerificationEvent): void {
    this.events.push(event);
  }
}
