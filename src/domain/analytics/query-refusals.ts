import type { ErrorCode } from "../../errors/catalogue.js";
import { KeygateError } from "../../errors/keygate-error.js";
import { defined } from "../../lib/defined.js";
import type { TableFamily } from "./tables.js";

// How a refused analytics query is explained to the customer.

/** The tables a procedure reads, for messages. */
export function tableNames(family: TableFamily): string {
  return family.tables.map((table) => table.name).join(", ");
}

export function onlySelect(): KeygateError {
  return invalid("err:user:bad_request:invalid_analytics_query_type", "Only SELECT queries are allowed.");
}

export function quotedIdentifier(): KeygateError {
  return invalid("err:user:bad_request:invalid_analytics_query", "Quoted identifiers may contain only letters, digits and underscores.");
}

export function unknownTable(name: string, family: TableFamily): KeygateError {
  return invalid(
    "err:user:bad_request:invalid_analytics_table",
    `'${name}' is not a table ${family.procedure} reads. Tables: ${tableNames(family)}.`,
  );
}

/** A refused query: the problem is always the body's `query`, so errors[] names it. */
export function invalid(code: ErrorCode, detail: string, cause?: unknown): KeygateError {
  return new KeygateError(code, detail, {
    errors: [{ location: "body.query", message: detail }],
    ...defined({ cause }),
  });
}

/**
 * The first sentence of ClickHouse's message, without its code, exception prefix, the statement it quotes (which
 * carries keygate's SETTINGS) or the internal database name.
 */
export function engineMessage(message: string, database: string): string {
  let text = (message.split("\n")[0] as string).replace(/^(Code: \d+\. )?(DB::Exception: )*/g, "");
  text = text.replace(/Code: \d+\. DB::Exception: /g, "");
  for (const marker of [
    " In scope ",
    ": In scope ",
    ". In scope ",
    " in scope ",
    ": While processing ",
    ": while executing ",
    " (version ",
  ]) {
    const at = text.indexOf(marker);
    if (at > 0) text = text.slice(0, at);
  }
  text = text
    .replace(/ \([A-Z_]+\)\.?$/, "")
    .replaceAll(`${database}.`, "")
    .replace(/[\s.:;,]+$/, "")
    .trim();
  if (text.length > 300) text = `${text.slice(0, 297)}...`;
  return /[.?!]$/.test(text) ? text : `${text}.`;
}
