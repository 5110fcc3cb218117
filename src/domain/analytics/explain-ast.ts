/**
 * Reads ClickHouse's `EXPLAIN AST` output into a tree. Each line is one node: indentation (one space per level),
 * the node type, then for most types a name, `(alias x)` and `(children n)`. The reader is strict and fails closed:
 * any line it does not understand, or a children count that does not match the lines below it, makes the whole
 * text unreadable. (Identifiers are printed raw, which is why the caller first makes sure every identifier is a
 * plain word: then no identifier can forge a line.)
 */

export interface AstNode {
  readonly type: string;
  /** Function, identifier or table name; for a Literal, its printed value. */
  readonly name: string | undefined;
  readonly alias: string | undefined;
  readonly children: AstNode[];
  readonly depth: number;
}

export class UnreadableAstError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnreadableAstError";
  }
}

const NODE_LINE =
  /^(?<type>[A-Za-z][A-Za-z0-9_]*(?:::[A-Za-z][A-Za-z0-9_]*)?)(?: (?<name>[^\s()]+))?(?: \(alias (?<alias>[A-Za-z0-9_]+)\))?(?: \(children (?<children>\d+)\))?$/;
const LITERAL_LINE = /^Literal (?<value>.+?)(?: \(alias (?<alias>[A-Za-z0-9_]+)\))?$/;

interface Pending {
  node: AstNode;
  expectedChildren: number;
}

export function parseExplainAst(text: string): AstNode {
  const lines = text.split("\n");
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  if (lines.length === 0) throw new UnreadableAstError("empty EXPLAIN AST output");

  const stack: Pending[] = [];
  let root: AstNode | undefined;
  for (const [index, line] of lines.entries()) {
    const depth = line.length - line.trimStart().length;
    const body = line.slice(depth);
    if (line.slice(0, depth) !== " ".repeat(depth)) throw new UnreadableAstError(`line ${index + 1}: unexpected indentation`);
    const parsed = parseLine(body);
    if (!parsed) throw new UnreadableAstError(`line ${index + 1}: cannot read '${body.slice(0, 80)}'`);

    while (stack.length > depth) closeNode(stack.pop() as Pending);
    if (stack.length !== depth) throw new UnreadableAstError(`line ${index + 1}: indentation skips a level`);
    const node: AstNode = { ...parsed.node, depth, children: [] };
    if (depth === 0) {
      if (root) throw new UnreadableAstError("more than one statement");
      root = node;
    } else {
      (stack[depth - 1] as Pending).node.children.push(node);
    }
    stack.push({ node, expectedChildren: parsed.children });
  }
  while (stack.length > 0) closeNode(stack.pop() as Pending);
  return root as AstNode;
}

function closeNode(pending: Pending): void {
  if (pending.node.children.length !== pending.expectedChildren) {
    throw new UnreadableAstError(
      `${pending.node.type} announces ${pending.expectedChildren} children but has ${pending.node.children.length}`,
    );
  }
}

function parseLine(body: string): { node: Omit<AstNode, "depth" | "children">; children: number } | undefined {
  if (body.startsWith("Literal ")) {
    const literal = LITERAL_LINE.exec(body);
    if (!literal?.groups) return undefined;
    return { node: { type: "Literal", name: literal.groups.value, alias: literal.groups.alias }, children: 0 };
  }
  const match = NODE_LINE.exec(body);
  if (!match?.groups) return undefined;
  const { type, name, alias, children } = match.groups;
  return { node: { type: type as string, name, alias }, children: children === undefined ? 0 : Number(children) };
}

/** Every node of the tree, parents before children. */
export function* walk(node: AstNode, parent?: AstNode): Generator<{ node: AstNode; parent: AstNode | undefined }> {
  yield { node, parent };
  for (const child of node.children) yield* walk(child, node);
}

/** The tree printed back in EXPLAIN AST's own layout, to compare two trees. */
export function printAst(node: AstNode): string {
  const parts = [node.type];
  if (node.name !== undefined) parts.push(node.name);
  if (node.alias !== undefined) parts.push(`(alias ${node.alias})`);
  if (node.children.length > 0) parts.push(`(children ${node.children.length})`);
  return [" ".repeat(node.depth) + parts.join(" "), ...node.children.map(printAst)].join("\n");
}
