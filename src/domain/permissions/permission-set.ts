import type { PermissionQuery } from "./query.js";

/**
 * The permissions a key (or root key) holds, with wildcards (docs/decisions.md#permission-queries): a held name
 * ending in `.*` grants every name below that prefix at any depth (`documents.*` grants `documents.read` and
 * `documents.a.b`, not `documents`), and a held `*` grants everything. Built once per key and cached, so checks
 * are set lookups.
 */
export class PermissionSet {
  private readonly exact: ReadonlySet<string>;
  private readonly prefixes: readonly string[];
  private readonly all: boolean;

  constructor(held: Iterable<string>) {
    const exact = new Set<string>();
    const prefixes: string[] = [];
    let all = false;
    for (const name of held) {
      if (name === "*") all = true;
      else if (name.endsWith(".*")) prefixes.push(name.slice(0, -1));
      exact.add(name);
    }
    this.exact = exact;
    this.prefixes = prefixes;
    this.all = all;
  }

  has(name: string): boolean {
    if (this.all || this.exact.has(name)) return true;
    for (const prefix of this.prefixes) {
      if (name.length > prefix.length && name.startsWith(prefix)) return true;
    }
    return false;
  }

  satisfies(query: PermissionQuery): boolean {
    switch (query.kind) {
      case "permission":
        return this.has(query.name);
      case "and":
        return query.operands.every((operand) => this.satisfies(operand));
      case "or":
        return query.operands.some((operand) => this.satisfies(operand));
    }
  }

  /**
   * Why `query` is not satisfied, in words, naming only the unmet parts:
   * "Missing permission: 'a'", "Missing one of these permissions: 'a' or 'b'", joined with "; " under AND.
   * Returns undefined when the query is satisfied.
   */
  explainMissing(query: PermissionQuery): string | undefined {
    if (this.satisfies(query)) return undefined;
    switch (query.kind) {
      case "permission":
        return `Missing permission: '${query.name}'`;
      case "or":
        if (query.operands.every((operand) => operand.kind === "permission")) {
          const names = query.operands.map((operand) => `'${(operand as { name: string }).name}'`);
          return `Missing one of these permissions: ${names.join(" or ")}`;
        }
        return `Missing one of: ${query.operands.map((operand) => `(${this.explainMissing(operand)})`).join(" or ")}`;
      case "and":
        return query.operands
          .map((operand) => this.explainMissing(operand))
          .filter((reason): reason is string => reason !== undefined)
          .join("; ");
    }
  }
}
