import type { AnalyticsRuntime } from "../analytics/index.js";
import type { AnalyticsConnection } from "../domain/analytics/query-engine.js";
import type { Question } from "./channel.js";

/** What the primary answers a worker's question with: every worker's metrics, or its analytics engine's work. */
export function answerWorker(
  question: Question,
  connections: RemoteConnections | undefined,
  analytics: AnalyticsRuntime | undefined,
  metricsOfAll: () => Promise<string>,
): Promise<unknown> {
  switch (question.kind) {
    case "metrics":
      return metricsOfAll();
    case "analytics-check":
      return analytics ? analytics.check() : Promise.resolve();
    case "analytics-flush":
      return analytics ? analytics.flush() : Promise.resolve();
    case "audit-admit":
      return analytics ? analytics.audit.admit() : Promise.resolve();
    case "audit-settled":
      return analytics ? analytics.audit.settled() : Promise.resolve();
    case "audit-list":
      return analytics ? analytics.audit.list(question.query) : Promise.resolve([]);
    case "sql":
    case "release":
      if (!connections) return Promise.reject(new Error("analytics are not kept in the primary"));
      return question.kind === "release" ? connections.release(question.connection) : connections.run(question);
    case "metrics-json":
      return Promise.reject(new Error("the primary has no series of its own to give"));
  }
}

/**
 * A worker's analytics connections, opened in the primary's engine on their first statement and released when the
 * worker says so (or dies), so the statements of one analytics request share one connection, as on a local engine.
 */
export class RemoteConnections {
  private readonly analytics: AnalyticsRuntime;
  private readonly open = new Map<number, Promise<{ connection: AnalyticsConnection; release: () => void }>>();

  constructor(analytics: AnalyticsRuntime) {
    this.analytics = analytics;
  }

  async run(statement: Extract<Question, { kind: "sql" }>): Promise<unknown> {
    const { connection } = await this.opened(statement.connection);
    return statement.rows ? connection.rows(statement.sql, statement.params) : connection.text(statement.sql, statement.params);
  }

  async release(id: number): Promise<void> {
    const opened = this.open.get(id);
    this.open.delete(id);
    if (opened) (await opened).release();
  }

  releaseAll(): void {
    for (const id of [...this.open.keys()]) void this.release(id).catch(() => {});
  }

  private opened(id: number): Promise<{ connection: AnalyticsConnection; release: () => void }> {
    let opened = this.open.get(id);
    if (!opened) {
      const engine = this.analytics.engine;
      if (!engine) return Promise.reject(new Error("analytics are off"));
      opened = new Promise((resolve, reject) => {
        engine
          .withConnection(
            (connection) =>
              new Promise<void>((release) => {
                resolve({ connection, release });
              }),
          )
          .catch(reject);
      });
      this.open.set(id, opened);
    }
    return opened;
  }
}
