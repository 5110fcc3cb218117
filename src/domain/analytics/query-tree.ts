/**
 * Reads what keygate needs from ClickHouse's `EXPLAIN QUERY TREE`: the query after analysis, with every table read
 * resolved to `database.table` (CTEs and subqueries are inlined as QUERY nodes, so a name that is only a CTE never
 * shows as a table), every table function, and the constant each `time` comparison folds to.
 */

interface TreeLine {
  readonly text: string;
  readonly indent: number;
  readonly children: TreeLine[];
}

export interface TimeComparison {
  /** `database.table` whose `time` column is compared. */
  readonly table: string;
  /** `lower` for `time >= c` / `time > c` (and `c <= time`, `c < time`); `upper` for the mirror forms. */
  readonly side: "lower" | "upper";
  readonly constantValue: string;
  readonly constantType: string;
}

export interface QueryTreeFacts {
  /** Every table read, as `database.table`, in order of appearance (may repeat). */
  readonly tables: readonly string[];
  readonly tableFunctions: readonly string[];
  readonly timeComparisons: readonly TimeComparison[];
}

const TABLE_LINE = /^TABLE id: (?<id>\d+)(?:, alias: [^,]+)?, table_name: (?<name>\S+)$/;
const TABLE_FUNCTION_LINE = /^TABLE_FUNCTION id: \d+(?:, alias: [^,]+)?, table_function_name: (?<name>\S+)/;
const FUNCTION_LINE = /^FUNCTION id: \d+, function_name: (?<name>[^,]+),/;
const COLUMN_LINE = /^COLUMN id: \d+, column_name: (?<name>[^,]+), result_type: .*, source_id: (?<source>\d+)$/;
const CONSTANT_PREFIX = /^CONSTANT id: \d+, constant_value: /;
const CONSTANT_TYPE_SEPARATOR = ", constant_value_type: ";

const LOWER_WHEN_COLUMN_FIRST: Record<string, "lower" | "upper"> = {
  greaterOrEquals: "lower",
  greater: "lower",
  lessOrEquals: "upper",
  less: "upper",
};

export function readQueryTree(text: string): QueryTreeFacts {
  const lines = toLines(text);
  const tables: string[] = [];
  const tableFunctions: string[] = [];
  const tableById = new Map<string, string>();
  for (const line of flatten(lines)) {
    const table = TABLE_LINE.exec(line.text)?.groups;
    if (table) {
      tables.push(table.name as string);
      tableById.set(table.id as string, table.name as string);
    }
    // Any line naming a table function counts, wherever it sits.
    if (line.text.startsWith("TABLE_FUNCTION")) tableFunctions.push(TABLE_FUNCTION_LINE.exec(line.text)?.groups?.name ?? "(unnamed)");
  }

  const timeComparisons: TimeComparison[] = [];
  for (const line of flatten(lines)) {
    const name = FUNCTION_LINE.exec(line.text)?.groups?.name;
    const columnFirstSide = name === undefined ? undefined : LOWER_WHEN_COLUMN_FIRST[name];
    if (!columnFirstSide) continue;
    const [first, second] = argumentsOf(line);
    if (!first || !second) continue;
    const columnFirst = timeColumnTable(first, tableById);
    const constantFirst = constantOf(first);
    if (columnFirst !== undefined && constantOf(second)) {
      timeComparisons.push({ table: columnFirst, side: columnFirstSide, ...(constantOf(second) as Constant) });
    } else if (constantFirst && timeColumnTable(second, tableById) !== undefined) {
      timeComparisons.push({
        table: timeColumnTable(second, tableById) as string,
        side: columnFirstSide === "lower" ? "upper" : "lower",
        ...constantFirst,
      });
    }
  }
  return { tables, tableFunctions, timeComparisons };
}

interface Constant {
  constantValue: string;
  constantType: string;
}

function constantOf(line: TreeLine): Constant | undefined {
  if (!CONSTANT_PREFIX.test(line.text)) return undefined;
  const rest = line.text.replace(CONSTANT_PREFIX, "");
  const separator = rest.lastIndexOf(CONSTANT_TYPE_SEPARATOR);
  if (separator < 0) return undefined;
  return { constantValue: rest.slice(0, separator), constantType: rest.slice(separator + CONSTANT_TYPE_SEPARATOR.length) };
}

function timeColumnTable(line: TreeLine, tableById: ReadonlyMap<string, string>): string | undefined {
  const column = COLUMN_LINE.exec(line.text)?.groups;
  if (column?.name !== "time") return undefined;
  return tableById.get(column.source as string);
}

/** The argument nodes of a FUNCTION line: its ARGUMENTS section holds one LIST whose children are the arguments. */
function argumentsOf(line: TreeLine): TreeLine[] {
  const section = line.children.find((child) => child.text === "ARGUMENTS");
  const list = section?.children.find((child) => child.text.startsWith("LIST id:"));
  return list?.children ?? [];
}

function toLines(text: string): TreeLine[] {
  const roots: TreeLine[] = [];
  const stack: TreeLine[] = [];
  for (const raw of text.split("\n")) {
    if (raw.trim() === "") continue;
    const indent = raw.length - raw.trimStart().length;
    const line: TreeLine = { text: raw.trim(), indent, children: [] };
    while (stack.length > 0 && (stack[stack.length - 1] as TreeLine).indent >= indent) stack.pop();
    const parent = stack[stack.length - 1];
    if (parent) parent.children.push(line);
    else roots.push(line);
    stack.push(line);
  }
  return roots;
}

function* flatten(lines: readonly TreeLine[]): Generator<TreeLine> {
  for (const line of lines) {
    yield line;
    yield* flatten(line.children);
  }
}

/**
 * The instant (unix ms) a constant compared with a `time` column stands for, or undefined when it cannot be read
 * with certainty. `time` counts unix ms in the raw table, seconds in DateTime buckets and days in Date buckets;
 * a plain number is read in the column's own unit.
 */
export function constantToMs(constant: Constant, column: "unixMs" | "dateTime" | "date"): number | undefined {
  const type = constant.constantType.replace(/^Nullable\((.*)\)$/, "$1").replace(/^LowCardinality\((.*)\)$/, "$1");
  const value = constant.constantValue;
  const integer = /^U?Int\d+_(-?\d+)$/.exec(value);
  const decimal = /^Decimal\d+_'(-?\d+(?:\.\d+)?)'$/.exec(value);
  const text = /^'([0-9: .TZ-]+)'$/.exec(value);
  if (/^DateTime64/.test(type) && decimal) return Math.round(Number(decimal[1]) * 1000);
  if (/^DateTime(\(|$)/.test(type) && integer) return Number(integer[1]) * 1000;
  if (/^Date(32)?$/.test(type) && integer) return Number(integer[1]) * 86_400_000;
  if (/^U?Int\d+$/.test(type) && integer) {
    const number = Number(integer[1]);
    return column === "unixMs" ? number : column === "dateTime" ? number * 1000 : number * 86_400_000;
  }
  if (type === "String" && text) {
    const parsed = Date.parse(`${(text[1] as string).trim().replace(" ", "T")}${/T|Z|:/.test(text[1] as string) ? "" : "T00:00:00"}Z`);
    return Number.isNaN(parsed) ? undefined : parsed;
  }
  return undefined;
}
