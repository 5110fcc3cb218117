/**
 * What the analytics domain needs from a ClickHouse engine (embedded chDB or a server). The adapters under
 * src/analytics implement it; the domain composes every statement itself and never sees a driver.
 */
export interface AnalyticsQueryEngine {
  /** The database that holds the public tables; analytics statements run with it as current database. */
  readonly database: string;
  /**
   * Runs `work` on a connection of its own, released when `work` settles. The statements of one analytics request
   * share it and no other request's do, so no engine state (nor a result) can pass from one caller to another.
   */
  withConnection<T>(work: (connection: AnalyticsConnection) => Promise<T>): Promise<T>;
}

/** One engine connection, used by one analytics request at a time. */
export interface AnalyticsConnection {
  /**
   * Runs one statement and returns its output as TabSeparatedRaw text. `params` bind `{name:String}` placeholders
   * in the engine, so their values never become SQL text.
   */
  text(sql: string, params?: Record<string, string>): Promise<string>;
  /** Runs one SELECT and returns its rows as objects, keys in select order (JSONEachRow). */
  rows(sql: string, params?: Record<string, string>): Promise<Record<string, unknown>[]>;
}

/**
 * A failure reported by an engine: `query` when ClickHouse refused or aborted the statement (with its numeric
 * error code), `unavailable` when the engine could not be reached or is not ready.
 */
export class AnalyticsEngineError extends Error {
  readonly kind: "query" | "unavailable";
  readonly code: number | undefined;

  constructor(kind: "query" | "unavailable", message: string, options: { code?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "AnalyticsEngineError";
    this.kind = kind;
    this.code = options.code;
  }
}
