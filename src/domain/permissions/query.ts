/**
 * The permission query language (docs/decisions.md#permission-queries): permission names combined with AND, OR
 * and parentheses. AND binds tighter than OR; keywords are accepted in any case; at most MAX_QUERY_LENGTH
 * characters.
 */
export type PermissionQuery =
  | { readonly kind: "permission"; readonly name: string }
  | { readonly kind: "and"; readonly operands: readonly PermissionQuery[] }
  | { readonly kind: "or"; readonly operands: readonly PermissionQuery[] };

export const MAX_QUERY_LENGTH = 1000;

/** Characters a permission name may contain, as in Unkey's lexer. */
const NAME_CHAR = /[A-Za-z0-9._:\-*/]/;

/** A query that does not parse. `position` is 1-based; the message names it. */
export class PermissionQuerySyntaxError extends Error {
  readonly position: number;
  constructor(message: string, position: number) {
    super(message);
    this.name = "PermissionQuerySyntaxError";
    this.position = position;
  }
}

type Token =
  | { type: "name"; value: string; position: number }
  | { type: "and" | "or" | "(" | ")" | "end"; value: string; position: number };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const char = text[i] as string;
    if (char === " " || char === "\t" || char === "\n" || char === "\r") {
      i++;
    } else if (char === "(" || char === ")") {
      tokens.push({ type: char, value: char, position: i + 1 });
      i++;
    } else if (NAME_CHAR.test(char)) {
      const start = i;
      while (i < text.length && NAME_CHAR.test(text[i] as string)) i++;
      const value = text.slice(start, i);
      const upper = value.toUpperCase();
      if (upper === "AND" || upper === "OR") tokens.push({ type: upper === "AND" ? "and" : "or", value, position: start + 1 });
      else tokens.push({ type: "name", value, position: start + 1 });
    } else {
      throw new PermissionQuerySyntaxError(`unexpected character '${char}' at position ${i + 1}`, i + 1);
    }
  }
  tokens.push({ type: "end", value: "", position: text.length + 1 });
  return tokens;
}

function describeToken(token: Token): string {
  if (token.type === "end") return "the end of the query";
  if (token.type === "and" || token.type === "or") return `operator ${token.value.toUpperCase()}`;
  return `'${token.value}'`;
}

export function parsePermissionQuery(text: string): PermissionQuery {
  if (text.length > MAX_QUERY_LENGTH) {
    throw new PermissionQuerySyntaxError(`the query is longer than ${MAX_QUERY_LENGTH} characters`, MAX_QUERY_LENGTH + 1);
  }
  const tokens = tokenize(text);
  if (tokens.length === 1) throw new PermissionQuerySyntaxError("the query is empty", 1);
  let index = 0;
  const peek = (): Token => tokens[index] as Token;
  const next = (): Token => tokens[index++] as Token;

  function parseOr(): PermissionQuery {
    const operands = [parseAnd()];
    while (peek().type === "or") {
      next();
      operands.push(parseAnd());
    }
    return operands.length === 1 ? (operands[0] as PermissionQuery) : { kind: "or", operands };
  }

  function parseAnd(): PermissionQuery {
    const operands = [parsePrimary()];
    while (peek().type === "and") {
      next();
      operands.push(parsePrimary());
    }
    return operands.length === 1 ? (operands[0] as PermissionQuery) : { kind: "and", operands };
  }

  function parsePrimary(): PermissionQuery {
    const token = next();
    if (token.type === "name") return { kind: "permission", name: token.value };
    if (token.type === "(") {
      const inner = parseOr();
      const closing = next();
      if (closing.type !== ")") {
        throw new PermissionQuerySyntaxError(
          `expected ')' to close the '(' at position ${token.position}, found ${describeToken(closing)} at position ${closing.position}`,
          closing.position,
        );
      }
      return inner;
    }
    throw new PermissionQuerySyntaxError(
      `expected a permission or '(' at position ${token.position}, found ${describeToken(token)}`,
      token.position,
    );
  }

  const query = parseOr();
  const rest = peek();
  if (rest.type !== "end") {
    const message =
      rest.type === ")"
        ? `unmatched ')' at position ${rest.position}`
        : `expected AND, OR or the end of the query at position ${rest.position}, found ${describeToken(rest)}`;
    throw new PermissionQuerySyntaxError(message, rest.position);
  }
  return query;
}

/** A query in canonical text form, parenthesised where precedence needs it. */
export function formatQuery(query: PermissionQuery): string {
  if (query.kind === "permission") return query.name;
  const parts = query.operands.map((operand) =>
    query.kind === "and" && operand.kind === "or" ? `(${formatQuery(operand)})` : formatQuery(operand),
  );
  return parts.join(query.kind === "and" ? " AND " : " OR ");
}

export function permission(name: string): PermissionQuery {
  return { kind: "permission", name };
}

/** At least one of the named permissions. */
export function anyOf(...names: string[]): PermissionQuery {
  return names.length === 1 ? permission(names[0] as string) : { kind: "or", operands: names.map(permission) };
}

/** Every one of the requirements. */
export function allOf(...requirements: PermissionQuery[]): PermissionQuery {
  return requirements.length === 1 ? (requirements[0] as PermissionQuery) : { kind: "and", operands: requirements };
}
