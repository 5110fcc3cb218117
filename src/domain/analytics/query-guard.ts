import { randomUUID } from "node:crypto";
import type { ErrorCode } from "../../errors/catalogue.js";
import { KeygateError } from "../../errors/keygate-error.js";
import { type AstNode, parseExplainAst, UnreadableAstError } from "./explain-ast.js";
import { type AnalyticsConnection, AnalyticsEngineError } from "./query-engine.js";
import { engineMessage, invalid, onlySelect, tableNames, unknownTable } from "./query-refusals.js";
import { checkQuotedIdentifiers, inspectAst, verifyComposition } from "./query-shape.js";
import { constantToMs, readQueryTree } from "./query-tree.js";
import { isSafeId, quoteString, safeId, settingValue } from "./sql.js";
import { PUBLIC_TABLES, type PublicTable, type RetentionDays, retentionCutoffMs, type TableFamily } from "./tables.js";

/**
 * The security boundary of analytics. A customer's SQL is never trusted as text: ClickHouse's own parser
 * canonicalises it and prints its syntax tree, which must be a single SELECT over the public tables (or the
 * query's own CTEs) calling only allowed functions, with no SETTINGS, FORMAT or INTO OUTFILE. The canonical text
 * then runs with keygate's SETTINGS, applied by the engine: `additional_table_filters` confines every read of a
 * public table to the caller's workspace (and key spaces) and retention window, `readonly = 1` forbids writes and
 * table functions, and limits bound time, memory, rows read and rows returned. The analysed query tree confirms
 * that nothing but the procedure's own tables is read. One guard serves one family of tables (one procedure).
 */

export interface Confinement {
  readonly workspaceId: string;
  /** undefined: the whole workspace; otherwise only rows whose scope column (the family's) holds one of these. */
  readonly scopeIds: readonly string[] | undefined;
}

export interface QueryLimits {
  readonly maxExecutionMs: number;
  readonly maxMemoryBytes: number;
  readonly maxResultRows: number;
  readonly maxResultBytes: number;
  readonly maxRowsToRead: number;
}

export interface ParsedQuery {
  /** The engine's canonical one-line form of the query: comments gone, one statement. */
  readonly canonical: string;
  readonly ast: AstNode;
  /** Key space ids the query compares `key_space_id` with, as written. */
  readonly keySpaceLiterals: readonly string[];
}

/** Tables a FROM-less SELECT reads implicitly; it holds one row and nothing else. */
const IMPLICIT_TABLES = new Set(["system.one"]);

/**
 * The guard works on one engine connection per request (AnalyticsQueryEngine.withConnection); every method that
 * talks to the engine takes it.
 */
export class QueryGuard {
  private readonly database: string;
  private readonly limits: QueryLimits;
  private readonly retentionDays: RetentionDays;
  private readonly family: TableFamily;

  constructor(database: string, limits: QueryLimits, retentionDays: RetentionDays, family: TableFamily) {
    this.database = safeId(database, "database");
    this.limits = limits;
    this.retentionDays = retentionDays;
    this.family = family;
  }

  /** Canonicalises and classifies the query with the engine's parser. Throws 400s for anything not allowed. */
  async parse(connection: AnalyticsConnection, query: string): Promise<ParsedQuery> {
    // The customer's text is a bound parameter here: the engine parses it, it never becomes part of a statement.
    // The nonce proves the answer belongs to this statement (see checkAnswer).
    const nonce = randomUUID();
    const [forms] = await connection
      .rows(
        "SELECT {nonce:String} AS nonce, formatQuerySingleLine({query:String}) AS canonical, normalizeQueryKeepNames(canonical) AS shape SETTINGS readonly = 1",
        { nonce, query },
      )
      .catch((error: unknown) => {
        throw this.failure(error);
      });
    checkAnswer(forms?.nonce === nonce);
    const canonical = String(forms?.canonical ?? "");
    const shape = String(forms?.shape ?? "");
    if (canonical.trim() === "") throw invalid("err:user:bad_request:invalid_analytics_query", "The query is empty.");
    checkQuotedIdentifiers(shape);

    const ast = await this.explainAst(connection, canonical);
    return { canonical, ast, keySpaceLiterals: inspectAst(ast, this.family) };
  }

  /**
   * The statement that runs: the canonical query with keygate's SETTINGS. Its syntax tree must be the query's own
   * plus exactly that SETTINGS clause, and its analysed tree must read public tables only, no older than retention.
   *
   * The EXPLAIN statements carry the confinement (analysis may already run scalar subqueries) but not the limits on
   * the result size, which ClickHouse would apply to the EXPLAIN output itself. The statement that runs has the
   * same SETTINGS list with the result limits appended at its end, so it parses the same way.
   */
  async confine(connection: AnalyticsConnection, parsed: ParsedQuery, confinement: Confinement, nowMs: number): Promise<string> {
    const analysed = `${parsed.canonical} SETTINGS ${this.analysisSettings(confinement, nowMs)}`;
    verifyComposition(parsed.ast, await this.explainAst(connection, analysed));

    const treeText = await connection.text(`EXPLAIN QUERY TREE ${analysed}`).catch((error: unknown) => {
      throw this.failure(error);
    });
    checkAnswer(/^(QUERY|UNION) id: \d+/.test(treeText));
    const tree = readQueryTree(treeText);
    if (tree.tableFunctions.length > 0) {
      throw invalid(
        "err:user:bad_request:invalid_analytics_function",
        `Table functions are not allowed (${tree.tableFunctions.join(", ")}).`,
      );
    }
    for (const name of tree.tables) {
      if (IMPLICIT_TABLES.has(name)) continue;
      const table = name.startsWith(`${this.database}.`) ? this.ownTable(name.slice(this.database.length + 1)) : undefined;
      if (!table) throw unknownTable(name.split(".").pop() as string, this.family);
    }
    for (const comparison of tree.timeComparisons) {
      if (comparison.side !== "lower") continue;
      const table = this.ownTable(comparison.table.slice(this.database.length + 1));
      if (!table) continue;
      const boundMs = constantToMs(comparison, table.time);
      const cutoffMs = retentionCutoffMs(table, this.retentionDays, nowMs);
      if (boundMs !== undefined && boundMs < cutoffMs - Math.max(table.bucketMs, 60_000)) {
        throw invalid(
          "err:user:bad_request:query_range_exceeds_retention",
          `${table.name} keeps ${this.retentionDays[table.retention]} days of data; the query asks for data from ${instant(boundMs)}, before ${instant(cutoffMs)}.`,
        );
      }
    }
    return `${analysed}, ${this.resultSettings()}`;
  }

  async run(connection: AnalyticsConnection, statement: string): Promise<Record<string, unknown>[]> {
    try {
      return await connection.rows(statement);
    } catch (error) {
      throw this.failure(error);
    }
  }

  /**
   * Confinement first (another family's tables are filtered to nothing, besides being refused by name), then
   * read-only mode and the limits on time, memory and rows read.
   */
  analysisSettings(confinement: Confinement, nowMs: number): string {
    const filters = PUBLIC_TABLES.map(
      (table) => `${quoteString(`${this.database}.${table.name}`)}: ${quoteString(this.rowFilter(table, confinement, nowMs))}`,
    );
    return [
      `additional_table_filters = {${filters.join(", ")}}`,
      ...settingsList([
        ["readonly", 1],
        ["max_execution_time", this.limits.maxExecutionMs / 1000],
        ["timeout_overflow_mode", "throw"],
        ["max_memory_usage", this.limits.maxMemoryBytes],
        ["max_rows_to_read", this.limits.maxRowsToRead],
        ["read_overflow_mode", "throw"],
        ["use_query_cache", 0],
        ["session_timezone", "UTC"],
        // Analytics is background work for this process: its engine threads yield the CPU to serving requests.
        ["os_thread_priority", 10],
      ]),
    ].join(", ");
  }

  /** Limits on the rows returned, and numbers written as JSON numbers. */
  resultSettings(): string {
    return settingsList([
      // `limit` clamps the LIMIT of each top-level SELECT; max_result_rows then bounds what a UNION adds up to.
      ["limit", this.limits.maxResultRows],
      ["max_result_rows", this.limits.maxResultRows],
      ["max_result_bytes", this.limits.maxResultBytes],
      ["result_overflow_mode", "throw"],
      ["output_format_json_quote_64bit_integers", 0],
      ["output_format_json_quote_decimals", 0],
    ]).join(", ");
  }

  private ownTable(name: string): PublicTable | undefined {
    return this.family.tables.find((table) => table.name === name);
  }

  private rowFilter(table: PublicTable, confinement: Confinement, nowMs: number): string {
    if (!this.ownTable(table.name)) return "0";
    const conditions = [`workspace_id = ${quoteString(safeId(confinement.workspaceId, "workspace id"))}`];
    if (confinement.scopeIds !== undefined) {
      const column = this.family.scopeColumn;
      // A permission may name anything (`api.my-api.read_analytics`); what cannot be an id matches no row.
      const ids = confinement.scopeIds.filter(isSafeId);
      conditions.push(ids.length === 0 ? "0" : `${column} IN (${ids.map((id) => quoteString(id)).join(", ")})`);
    }
    const cutoffMs = retentionCutoffMs(table, this.retentionDays, nowMs);
    if (table.time === "unixMs") conditions.push(`time >= ${cutoffMs}`);
    else if (table.time === "dateTime") conditions.push(`time >= toDateTime(${Math.floor(cutoffMs / 1000)}, 'UTC')`);
    else conditions.push(`time >= toDate(${quoteString(new Date(cutoffMs).toISOString().slice(0, 10))})`);
    return conditions.join(" AND ");
  }

  private async explainAst(connection: AnalyticsConnection, statement: string): Promise<AstNode> {
    const text = await connection.text(`EXPLAIN AST ${statement}`).catch((error: unknown) => {
      throw this.failure(error);
    });
    // Other statements print their own layouts; the first word is enough to refuse them.
    if (text.split(/\s/, 1)[0] !== "SelectWithUnionQuery") throw onlySelect();
    try {
      return parseExplainAst(text);
    } catch (error) {
      if (error instanceof UnreadableAstError) {
        throw invalid("err:user:bad_request:invalid_analytics_query", "The query uses syntax that analytics queries do not accept.", error);
      }
      throw error;
    }
  }

  /** An engine failure in the customer's terms: 400 for the query, 422 for limits, 503 for the engine (docs/decisions.md#analytics). */
  failure(error: unknown): KeygateError {
    if (error instanceof KeygateError) return error;
    if (!(error instanceof AnalyticsEngineError))
      return new KeygateError("err:unkey:application:unexpected_error", "The analytics query failed unexpectedly.", { cause: error });
    if (error.kind === "unavailable") {
      return new KeygateError(
        "err:unkey:data:analytics_connection_failed",
        "The analytics engine cannot be reached right now; try again later.",
        { cause: error },
      );
    }
    const code = error.code ?? 0;
    const limits = this.limits;
    const byCode: Record<number, [ErrorCode, string]> = {
      159: [
        "err:user:unprocessable_entity:query_execution_timeout",
        `The query ran longer than the limit of ${limits.maxExecutionMs} ms; narrow the time range or use an aggregate table.`,
      ],
      241: [
        "err:user:unprocessable_entity:query_memory_limit_exceeded",
        `The query needed more than the limit of ${limits.maxMemoryBytes} bytes of memory.`,
      ],
      158: ["err:user:unprocessable_entity:query_rows_limit_exceeded", `The query would read more than ${limits.maxRowsToRead} rows.`],
      307: [
        "err:user:unprocessable_entity:query_rows_limit_exceeded",
        `The query would read or return more than the allowed number of bytes (${limits.maxResultBytes} returned at most).`,
      ],
      396: [
        "err:user:unprocessable_entity:query_rows_limit_exceeded",
        `The query would return more than ${limits.maxResultRows} rows or ${limits.maxResultBytes} bytes.`,
      ],
      201: ["err:user:too_many_requests:query_quota_exceeded", "The analytics engine's own quota for keygate is used up; try again later."],
      164: ["err:user:bad_request:invalid_analytics_query_type", "Only SELECT queries are allowed."],
      60: [
        "err:user:bad_request:invalid_analytics_table",
        `${engineMessage(error.message, this.database)} Tables: ${tableNames(this.family)}.`,
      ],
      81: ["err:user:bad_request:invalid_analytics_table", `Only these tables can be read: ${tableNames(this.family)}.`],
      46: ["err:user:bad_request:invalid_analytics_function", engineMessage(error.message, this.database)],
      63: ["err:user:bad_request:invalid_analytics_function", engineMessage(error.message, this.database)],
    };
    const engineTrouble = new Set([202, 209, 210, 497, 516, 1000]);
    if (engineTrouble.has(code)) {
      return new KeygateError(
        "err:unkey:data:analytics_connection_failed",
        "The analytics engine cannot run queries right now; try again later.",
        { cause: error },
      );
    }
    const mapped = byCode[code];
    if (mapped) return new KeygateError(mapped[0], mapped[1], { cause: error });
    return invalid(
      "err:user:bad_request:invalid_analytics_query",
      `The query is not valid: ${engineMessage(error.message, this.database)}`,
      error,
    );
  }
}

/**
 * chDB 3.4 can hand a connection the result of an earlier statement after a failed one (seen in testing; keygate
 * also gives every request its own connection). An answer that is not recognisably this statement's is refused.
 */
function checkAnswer(recognised: boolean): void {
  if (!recognised) throw new AnalyticsEngineError("unavailable", "the analytics engine answered with the result of another statement");
}

/** An ISO timestamp; a bound too early for a Date is "the distant past". */
function instant(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? "the distant past" : date.toISOString();
}

function settingsList(settings: [string, string | number][]): string[] {
  return settings.map(([name, value]) => `${name} = ${settingValue(value)}`);
}
