import { type ClickHouseClient, createClient, type DataFormat } from "@clickhouse/client";
import { type AnalyticsConnection, AnalyticsEngineError } from "../domain/analytics/query-engine.js";
import { safeId } from "../domain/analytics/sql.js";
import { defined } from "../lib/defined.js";
import { redactUrl } from "../lib/redact-url.js";
import { type AnalyticsEngine, type EventBatch, EventList } from "./analytics-engine.js";
import { type EventTable, toRow } from "./rows.js";

export interface ServerEngineOptions {
  url: string;
  database: string;
  username: string;
  password: string;
  requestTimeoutMs: number;
  /** Connections for queries; events get one more. */
  maxConcurrentQueries: number;
  /**
   * Builds a client in place of the HTTP one from the options above. Tests use it to run this adapter against a
   * real ClickHouse engine without a server (@clickhouse/client's connection hook over chDB).
   */
  createClient?: (options: { database?: string }) => ClickHouseClient;
}

/**
 * A ClickHouse server shared by every keygate instance, over HTTP with @clickhouse/client. Schema statements and
 * inserts use fully qualified names on a client without a current database (the database may not exist yet);
 * queries use a client whose current database is the analytics database, so customers' unqualified table names
 * resolve there.
 */
export class ServerEngine implements AnalyticsEngine {
  readonly kind = "clickhouse";
  readonly database: string;
  readonly location: string;

  private readonly admin: ClickHouseClient;
  private readonly queries: ClickHouseClient;

  constructor(options: ServerEngineOptions) {
    this.database = safeId(options.database, "database");
    this.location = `${redactUrl(options.url)} (database ${options.database})`;
    const make =
      options.createClient ??
      ((extra: { database?: string }) =>
        createClient({
          url: options.url,
          username: options.username,
          password: options.password,
          request_timeout: options.requestTimeoutMs,
          application: "keygate",
          max_open_connections: options.maxConcurrentQueries + 1,
          ...extra,
        }));
    this.admin = make({});
    this.queries = make({ database: options.database });
  }

  /** HTTP requests share no session state, so the client itself serves as every request's connection. */
  async withConnection<T>(work: (connection: AnalyticsConnection) => Promise<T>): Promise<T> {
    return work(this);
  }

  async text(sql: string, params?: Record<string, string>): Promise<string> {
    return this.run(sql, params, "TabSeparatedRaw");
  }

  async rows(sql: string, params?: Record<string, string>): Promise<Record<string, unknown>[]> {
    const text = await this.run(sql, params, "JSONEachRow");
    return text
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /**
   * Sends the statement exactly as composed: `exec` does not append a FORMAT clause (which `query` would, and which
   * ClickHouse would attach to the statement inside an EXPLAIN); the output format goes as `default_format`.
   */
  private async run(sql: string, params: Record<string, string> | undefined, format: DataFormat): Promise<string> {
    try {
      const result = await this.queries.exec({
        query: sql,
        clickhouse_settings: { default_format: format },
        ...defined({ query_params: params }),
      });
      const chunks: Buffer[] = [];
      for await (const chunk of result.stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
      // Decoded once, so a character split between chunks stays whole.
      return Buffer.concat(chunks).toString("utf8");
    } catch (error) {
      return engineError(error);
    }
  }

  async version(): Promise<string> {
    try {
      return (await (await this.admin.query({ query: "SELECT version()", format: "TabSeparatedRaw" })).text()).trim();
    } catch (error) {
      return engineError(error);
    }
  }

  async command(sql: string): Promise<void> {
    await this.admin.command({ query: sql }).catch(engineError);
  }

  newBatch<E>(table: EventTable<E>, region: string): EventList<E> {
    return new EventList(table, region);
  }

  async insertBatch(batch: EventBatch<unknown>): Promise<void> {
    if (!(batch instanceof EventList)) throw new TypeError("a batch of another engine");
    if (batch.size === 0) return;
    const rows = batch.events.map((event) => toRow(batch.table, event, batch.region));
    await this.admin.insert({ table: `${this.database}.${batch.table.name}`, values: rows, format: "JSONEachRow" }).catch(engineError);
  }

  releaseBatch(): void {}

  async close(): Promise<void> {
    await Promise.all([this.admin.close(), this.queries.close()]);
  }
}

/** ClickHouse's own errors carry a numeric code; anything else (refused connection, timeout) means unreachable. */
function engineError(error: unknown): never {
  const cause = error as { code?: unknown; message?: unknown; type?: unknown };
  const code = typeof cause.code === "string" && /^\d+$/.test(cause.code) ? Number(cause.code) : undefined;
  if (code !== undefined) throw new AnalyticsEngineError("query", String(cause.message), { code, cause: error });
  throw new AnalyticsEngineError("unavailable", `ClickHouse server: ${String(cause.message ?? error)}`, { cause: error });
}
