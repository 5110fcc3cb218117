/**
 * Seeded random input for the fuzz tests (test/fuzz): a small PRNG, random JSON of every shape, and request
 * bodies derived from a procedure's own JSON schema, valid or breaking exactly one constraint.
 */

/** The seed of this run: FUZZ_SEED when set (to reproduce a failure), else a fresh one. */
export function fuzzSeed(): number {
  const given = process.env.FUZZ_SEED;
  if (given !== undefined && given !== "") {
    const seed = Number(given);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
      throw new Error(`FUZZ_SEED must be an integer from 0 to 4294967295, got '${given}'`);
    return seed;
  }
  return Math.floor(Math.random() * 0x100000000);
}

/** mulberry32: a tiny deterministic PRNG; the same seed gives the same sequence on every machine. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.next() * items.length)] as T;
  }
}

/** Names that reach prototype machinery when code uses plain objects as maps. */
export const PROTOTYPE_NAMES = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "__defineGetter__",
  "isPrototypeOf",
] as const;

const STRING_SAMPLES = [
  "",
  " ",
  "a",
  "null",
  "true",
  "0",
  "-1",
  "é",
  "日本語",
  "💥",
  "\u0000",
  "\u202e",
  "\r\n",
  "a\u0000b",
  "' OR 1=1 --",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template placeholder is one of the hostile strings
  "${x}",
  "%s%n",
  "../../etc/passwd",
  "<script>",
  "api.*.read_key",
  "req_123",
  ...PROTOTYPE_NAMES,
];

/**
 * Any JSON value: every type, nested up to `depth` levels, with awkward strings, numbers and keys. With
 * `prototypeKeys` false no object has a key the JSON parser refuses (`__proto__`, `constructor`), so the value
 * can stand in a valid body.
 */
export function randomJson(random: Random, depth = 3, prototypeKeys = true): unknown {
  const kinds = depth > 0 ? 7 : 5;
  switch (random.int(0, kinds - 1)) {
    case 0:
      return null;
    case 1:
      return random.chance(0.5);
    case 2:
      return random.pick([0, -0, 1, -1, 0.5, 1e308, -1e308, 5e-324, 2 ** 53 + 2, 2 ** 31, -(2 ** 31) - 1, random.int(-1000, 1000)]);
    case 3:
      return randomString(random);
    case 4:
      return random.chance(0.5) ? [] : {};
    case 5:
      return Array.from({ length: random.int(1, 4) }, () => randomJson(random, depth - 1, prototypeKeys));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = random.int(1, 4); i > 0; i--) {
        // defineProperty: a "__proto__" key must be an own field of the JSON, not a prototype change.
        let key = randomKey(random);
        if (!prototypeKeys && (key === "__proto__" || key === "constructor")) key = `_${key}`;
        Object.defineProperty(object, key, {
          value: randomJson(random, depth - 1, prototypeKeys),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return object;
    }
  }
}

function randomKey(random: Random): string {
  return random.chance(0.3)
    ? random.pick(["", "a", "a.b", "0", "key", "name", "meta", "constructor", "toString", "x".repeat(300)])
    : randomString(random).slice(0, 40);
}

export function randomString(random: Random): string {
  if (random.chance(0.5)) return random.pick(STRING_SAMPLES);
  const length = random.pick([1, 3, 8, 40, 300]);
  let text = "";
  for (let i = 0; i < length; i++)
    text += String.fromCodePoint(
      random.pick([
        random.int(0x20, 0x7e),
        random.int(0x20, 0x7e),
        random.int(0, 0x1f),
        random.int(0xa0, 0x2fff),
        random.int(0x1f300, 0x1f6ff),
      ]),
    );
  return text;
}

/** JSON text nested `levels` deep: `[[[...]]]` or `{"a":{"a":...}}`. */
export function deeplyNested(levels: number, kind: "array" | "object"): string {
  return kind === "array" ? "[".repeat(levels) + "]".repeat(levels) : `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
}

// ---------------------------------------------------------------------------------------------------------
// Bodies from a JSON schema

/** The subset of JSON Schema the procedures' bodies use (TypeBox output). */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  maxProperties?: number;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  enum?: unknown[];
  default?: unknown;
}

export type Path = readonly (string | number)[];

/** Values that exist (ids of fixtures), by property name; a valid body mostly uses them where they fit. */
export type Hints = Readonly<Record<string, readonly string[]>>;

/** Where an error about `path` is reported: `body.ratelimits[0].name` (docs/errors.md). */
export function bodyLocation(path: Path): string {
  let location = "body";
  for (const segment of path) {
    if (typeof segment === "number") location += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(segment)) location += `.${segment}`;
    else location += `[${JSON.stringify(segment)}]`;
  }
  return location;
}

function typesOf(schema: JsonSchema): string[] {
  if (schema.type !== undefined) return Array.isArray(schema.type) ? schema.type : [schema.type];
  // An enum without a type allows the types of its values (null among them: an optional field that may be cleared).
  if (schema.enum) return [...new Set(schema.enum.map((value) => (value === null ? "null" : typeof value)))];
  return [];
}

/**
 * The patterns parsePattern cannot generate from (a route's path prefix, an upstream URL): a valid value, which may
 * be cut or padded with "x" and still match, and a value that does not match.
 */
const PATTERN_EXAMPLES: Readonly<Record<string, { valid: string; mismatch: string }>> = {
  "^/": { valid: "/fuzzed", mismatch: "fuzzed" },
  "^https?://[^\\s/?#]+[^\\s]*$": { valid: "http://127.0.0.1:9/fuzzed", mismatch: "ftp://127.0.0.1/fuzzed" },
  "^#[0-9a-fA-F]{6}$": { valid: "#12ab34", mismatch: "12ab34" },
};

/** One `[class]` of a pattern of the form `^[class]quantifier...$`, and how many characters it takes. */
interface PatternPart {
  chars: string[];
  min: number;
  max: number;
}

function parsePattern(pattern: string): PatternPart[] {
  const match = /^\^(.*)\$$/.exec(pattern);
  if (!match) throw new Error(`unsupported pattern ${pattern}`);
  const parts: PatternPart[] = [];
  const body = match[1] as string;
  let i = 0;
  while (i < body.length) {
    if (body[i] !== "[") throw new Error(`unsupported pattern ${pattern}`);
    const chars: string[] = [];
    i++;
    while (body[i] !== "]") {
      let char = body[i] as string;
      if (char === "\\") {
        i++;
        char = body[i] as string;
      }
      if (body[i + 1] === "-" && body[i + 2] !== "]" && body[i + 2] !== undefined) {
        const end = body[i + 2] === "\\" ? (body[i + 3] as string) : (body[i + 2] as string);
        for (let code = char.charCodeAt(0); code <= end.charCodeAt(0); code++) chars.push(String.fromCharCode(code));
        i += body[i + 2] === "\\" ? 4 : 3;
        continue;
      }
      chars.push(char);
      i++;
    }
    i++;
    const quantifier = body[i];
    if (quantifier === "+") parts.push({ chars, min: 1, max: Infinity });
    else if (quantifier === "*") parts.push({ chars, min: 0, max: Infinity });
    else parts.push({ chars, min: 1, max: 1 });
    if (quantifier === "+" || quantifier === "*") i++;
  }
  return parts;
}

/** A string of exactly `length` characters, drawn from the pattern's classes (cut short below the pattern's minimum). */
function stringOfLength(random: Random, schema: JsonSchema, length: number): string {
  if (!schema.pattern) {
    let text = "";
    for (let i = 0; i < length; i++)
      text += random.chance(0.9) ? String.fromCharCode(random.int(0x61, 0x7a)) : random.pick([" ", "é", "-", ".", "_", "0"]);
    return text;
  }
  const example = PATTERN_EXAMPLES[schema.pattern]?.valid;
  if (example !== undefined) {
    // Shorter than the example only when asked for a value too short to be valid; then the example cut.
    if (length < (schema.minLength ?? 0)) return example.slice(0, length);
    return example + "x".repeat(Math.max(0, length - example.length));
  }
  const parts = parsePattern(schema.pattern);
  const fixed = parts.reduce((sum, part) => sum + part.min, 0);
  let text = "";
  let free = Math.max(0, length - fixed);
  for (const part of parts) {
    let count = part.min;
    if (part.max === Infinity) {
      count += free;
      free = 0;
    }
    for (let i = 0; i < count; i++) text += random.pick(part.chars);
  }
  return text.slice(0, length);
}

function fits(schema: JsonSchema, value: string): boolean {
  const length = [...value].length;
  if (schema.minLength !== undefined && length < schema.minLength) return false;
  if (schema.maxLength !== undefined && length > schema.maxLength) return false;
  return schema.pattern === undefined || new RegExp(schema.pattern, "u").test(value);
}

export interface ValidOptions {
  /** Include every optional field and at least one item in every array (to reach every nested constraint). */
  full?: boolean;
  hints?: Hints;
}

/** A value that satisfies `schema`. `name` is the property the value is for (to use hints). */
export function validValue(random: Random, schema: JsonSchema, options: ValidOptions = {}, name?: string): unknown {
  if (schema.enum) return random.pick(schema.enum);
  const types = typesOf(schema);
  if (types.includes("null") && !options.full && random.chance(0.15)) return null;
  const type = types.find((candidate) => candidate !== "null");
  switch (type) {
    case "object": {
      if (schema.additionalProperties !== false && !schema.properties) {
        const object: Record<string, unknown> = {};
        const count = Math.min(schema.maxProperties ?? 5, random.int(0, 4));
        for (let i = 0; i < count; i++)
          object[`${random.pick(["plan", "tier", "region", "x", "nested"])}${i}`] = randomJson(random, 2, false);
        return object;
      }
      const object: Record<string, unknown> = {};
      for (const [property, child] of Object.entries(schema.properties ?? {})) {
        if (options.full || schema.required?.includes(property) || random.chance(0.5))
          object[property] = validValue(random, child, options, property);
      }
      return object;
    }
    case "array": {
      const min = Math.max(schema.minItems ?? 0, options.full ? 1 : 0);
      const max = Math.min(schema.maxItems ?? min + 3, min + 3);
      return Array.from({ length: random.int(min, max) }, () => validValue(random, schema.items ?? {}, options, name));
    }
    case "string": {
      const hinted = name !== undefined ? options.hints?.[name]?.filter((value) => fits(schema, value)) : undefined;
      if (hinted && hinted.length > 0 && random.chance(0.6)) return random.pick(hinted);
      const min = schema.minLength ?? 0;
      const max = schema.maxLength ?? min + 40;
      const length = random.pick([min, max, random.int(min, Math.min(max, min + 20)), random.int(min, Math.min(max, min + 20))]);
      const text = stringOfLength(random, schema, Math.max(length, min));
      return fits(schema, text) ? text : stringOfLength(random, schema, Math.max(min, 1));
    }
    case "integer": {
      const min = schema.minimum ?? -1_000_000;
      const max = schema.maximum ?? 1_000_000;
      const candidates = [min, max, random.int(min, Math.min(max, min + 100)), min + Math.floor(random.next() * (max - min))];
      if (min <= 0 && max >= 0) candidates.push(0);
      return random.pick(candidates);
    }
    case "number":
      return random.next();
    case "boolean":
      return random.chance(0.5);
    default:
      return randomJson(random, 2, false);
  }
}

/** A body that breaks exactly one constraint, and where the error must be reported. */
export interface Violation {
  /** What was broken, for failure messages: `body.limit above maximum`. */
  description: string;
  body: unknown;
  /** The `errors[].location` the 400 must name. */
  location: string;
}

/** A value of a JSON type the schema does not allow. */
function wrongType(random: Random, schema: JsonSchema): unknown {
  const allowed = typesOf(schema);
  const candidates: [string, unknown][] = [
    ["string", "wrong"],
    ["integer", 7],
    ["number", 1.5],
    ["boolean", true],
    ["null", null],
    ["array", []],
    ["object", {}],
  ];
  const fitsType = (type: string) => allowed.includes(type) || (type === "integer" && allowed.includes("number"));
  return random.pick(candidates.filter(([type]) => !fitsType(type)))[1];
}

/** A character outside every class of the pattern. */
function outsidePattern(pattern: string): string {
  for (const candidate of [" ", "!", "é", "\u0000", "\n", "💥", "<"]) {
    if (!parsePattern(pattern).some((part) => part.chars.includes(candidate))) return candidate;
  }
  throw new Error(`no character outside ${pattern}`);
}

/**
 * Every way of breaking one constraint of `schema`: a required field missing (unless it has a default, which
 * fills it), a wrong type, below minimum, above maximum, not an integer, too short, too long, a pattern
 * mismatch, an enum miss, an unknown field, too many or too few items, too many properties. Each violation is
 * applied to a body that is otherwise valid (with every optional field present, so nested constraints are reached).
 */
export function violations(random: Random, schema: JsonSchema, hints: Hints = {}): Violation[] {
  const found: Violation[] = [];
  const visit = (node: JsonSchema, path: Path, replace: (value: unknown) => unknown) => {
    const at = bodyLocation(path);
    const add = (description: string, value: unknown, location = at) =>
      found.push({ description: `${at}: ${description}`, body: replace(value), location });
    const types = typesOf(node);
    if (types.length > 0 && path.length > 0) add("wrong type", wrongType(random, node));
    if (node.enum) add("not one of the allowed values", `${String(node.enum[0])}_not_in_enum`);
    else if (types.includes("integer") || types.includes("number")) {
      if (node.minimum !== undefined) add("below minimum", node.minimum - 1);
      if (node.maximum !== undefined) add("above maximum", node.maximum + 1);
      if (types.includes("integer")) add("not an integer", (node.minimum ?? 0) + 0.5);
    } else if (types.includes("string")) {
      const valid = validValue(random, node, { full: true }) as string;
      if (node.minLength !== undefined && node.minLength > 0) add("too short", stringOfLength(random, node, node.minLength - 1));
      if (node.maxLength !== undefined)
        add("too long", node.pattern ? stringOfLength(random, node, node.maxLength + 1) : "x".repeat(node.maxLength + 1));
      if (node.pattern) {
        const mismatch = PATTERN_EXAMPLES[node.pattern]?.mismatch ?? valid.slice(0, -1) + outsidePattern(node.pattern);
        add("does not match the pattern", mismatch);
      }
    } else if (types.includes("array")) {
      const item = () => validValue(random, node.items ?? {}, { full: true, hints });
      if (node.maxItems !== undefined) add("too many items", Array.from({ length: node.maxItems + 1 }, item));
      if (node.minItems !== undefined && node.minItems > 0) add("too few items", Array.from({ length: node.minItems - 1 }, item));
      if (node.items) {
        visit(node.items, [...path, 0], (value) => {
          const items = [item()];
          items[0] = value;
          return replace(items);
        });
      }
    } else if (types.includes("object")) {
      const full = () => validValue(random, node, { full: true, hints }) as Record<string, unknown>;
      if (node.maxProperties !== undefined) {
        add("too many properties", Object.fromEntries(Array.from({ length: node.maxProperties + 1 }, (_, i) => [`field${i}`, i])));
      }
      if (node.properties) {
        for (const property of node.required ?? []) {
          if (node.properties[property]?.default !== undefined) continue;
          const object = full();
          delete object[property];
          add(`missing required field '${property}'`, object, bodyLocation([...path, property]));
        }
        if (node.additionalProperties === false)
          add("an unknown field", { ...full(), unexpectedField: 1 }, bodyLocation([...path, "unexpectedField"]));
        for (const [property, child] of Object.entries(node.properties)) {
          visit(child, [...path, property], (value) => replace({ ...full(), [property]: value }));
        }
      }
    }
  };
  visit(schema, [], (value) => value);
  return found;
}

/** Paths to the free-form objects of a schema (no declared properties, any field allowed: meta), arrays at item 0. */
export function freeFormPaths(schema: JsonSchema, path: Path = []): Path[] {
  const types = typesOf(schema);
  if (types.includes("object") && !schema.properties && schema.additionalProperties !== false) return [path];
  const found: Path[] = [];
  for (const [property, child] of Object.entries(schema.properties ?? {})) found.push(...freeFormPaths(child, [...path, property]));
  if (schema.items) found.push(...freeFormPaths(schema.items, [...path, 0]));
  return found;
}

/** Every path in `value` (objects and arrays walked), to mutate one spot of a valid body. */
export function pathsIn(value: unknown, path: Path = []): Path[] {
  const paths: Path[] = [path];
  if (Array.isArray(value)) for (const [index, item] of value.entries()) paths.push(...pathsIn(item, [...path, index]));
  else if (value !== null && typeof value === "object")
    for (const [key, child] of Object.entries(value)) paths.push(...pathsIn(child, [...path, key]));
  return paths;
}

/** A copy of `value` with the spot at `path` replaced (the root when the path is empty). */
export function replaceAt(value: unknown, path: Path, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, index) => (index === head ? replaceAt(item, rest, replacement) : item));
  const object = { ...(value as Record<string, unknown>) };
  object[head as string] = replaceAt(object[head as string], rest, replacement);
  return object;
}

export function valueAt(value: unknown, path: Path): unknown {
  return path.reduce<unknown>((node, segment) => (node as Record<string | number, unknown>)[segment], value);
}
