import type { AnalyticsQueryEngine } from "../domain/analytics/query-engine.js";
import type { EventTable } from "./rows.js";

/** An analytics engine as keygate's infrastructure sees it: the domain's query port plus writing and lifecycle. */
export interface AnalyticsEngine extends AnalyticsQueryEngine {
  readonly kind: "embedded" | "clickhouse";
  /** Where the data lives, for the start-up banner (a directory, or a URL without its password). */
  readonly location: string;
  /** The engine's ClickHouse version, e.g. `26.7.2.1`. */
  version(): Promise<string>;
  /** Runs a statement of keygate's own (schema), with no result. */
  command(sql: string): Promise<void>;
  /** An empty batch of rows of `table` from `region`, in the form this engine writes; the pipeline fills it as events come. */
  newBatch<E>(table: EventTable<E>, region: string): EventBatch<E>;
  /** Appends a batch this engine made to its table, one row per event. */
  insertBatch(batch: EventBatch<unknown>): Promise<void>;
  /** The batch is done with (written, or given up): the engine may reuse its memory for a new one. */
  releaseBatch(batch: EventBatch<unknown>): void;
  close(): Promise<void>;
}

/** Events gathered for one insert into one table, held in the form the engine writes them in. */
export interface EventBatch<E> {
  readonly table: EventTable<E>;
  /** Events added so far. */
  readonly size: number;
  /** Adds one event; when it throws, the batch is as it was. */
  add(event: E): void;
}

/** Events kept as they came, for an engine that converts them when it writes (a ClickHouse server's JSON rows). */
export class EventList<E> implements EventBatch<E> {
  readonly table: EventTable<E>;
  readonly events: E[] = [];
  readonly region: string;

  constructor(table: EventTable<E>, region: string) {
    this.table = table;
    this.region = region;
  }

  get size(): number {
    return this.events.length;
  }

  add(event: E): void {
    this.events.push(event);
  }
}
