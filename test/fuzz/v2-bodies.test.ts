import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { defined } from "../../src/lib/defined.js";
import { PROCEDURES } from "../../src/routes/v2/index.js";
import type { AnyProcedure } from "../../src/routes/v2/procedure.js";
import { envelopeProblem, errorName, excerpt, report } from "../helpers/envelope.js";
import {
  deeplyNested,
  freeFormPaths,
  fuzzSeed,
  type Hints,
  type JsonSchema,
  type Path,
  PROTOTYPE_NAMES,
  pathsIn,
  Random,
  randomJson,
  replaceAt,
  validValue,
  valueAt,
  violations,
} from "../helpers/fuzz.js";
import { type Harness, harness, ROOT_KEY, type StorageKind } from "../helpers/harness.js";
import { rawExchange } from "../helpers/raw-http.js";
import { REDIS_URL, uniquePrefix } from "../helpers/redis.js";

/*
 * Every /v2 procedure gets bodies generated from its own schema (valid ones, and each constraint broken one at a
 * time), random JSON of every shape, and hostile input (deep nesting, huge numbers, prototype names, invalid
 * UTF-8, very long strings, wrong media types). Whatever the body, the answer is never a 5xx and always in the
 * envelope with its x-request-id; a body that breaks the schema is a 400 naming the broken field.
 *
 * The run is seeded: the seed is printed, and FUZZ_SEED=<seed> runs the same inputs again.
 */

const SEED = fuzzSeed();
t.comment(`fuzz seed ${SEED}: FUZZ_SEED=${SEED} npx tap build/test/fuzz/v2-bodies.test.js runs these inputs again`);

/** How many bodies of each kind a procedure gets. */
interface Counts {
  valid: number;
  /** At most this many schema violations, picked at random (undefined: all of them, once each). */
  violations?: number;
  randomRoots: number;
  mutations: number;
  /** Spots of a valid body that get hostile values (huge numbers, odd strings, prototype names). */
  spots: number;
  /** How many values of each hostile list a spot gets, picked at random. */
  picks: number;
  /**
   * The chance that a procedure also gets the bodies decided before its schema matters (not JSON, media types,
   * deep nesting, prototype keys): each run covers a different part of the procedures with them.
   */
  parsing: number;
}

const MEMORY_COUNTS: Counts = { valid: 6, randomRoots: 4, mutations: 8, spots: 2, picks: 4, parsing: 0.3 };
const REDIS_COUNTS: Counts = { valid: 3, violations: 3, randomRoots: 1, mutations: 3, spots: 1, picks: 2, parsing: 0 };

interface BodyCase {
  label: string;
  payload: string | Buffer;
  /** null sends no Content-Type. */
  contentType?: string | null;
  /** The body breaks the schema here: the answer must be 400 invalid_input naming this location. */
  invalidAt?: string;
}

/** A per-procedure generator: adding or skipping one procedure does not change the inputs of the others. */
function randomFor(name: string, salt: number): Random {
  let hash = (SEED ^ salt) >>> 0;
  for (const char of name) hash = Math.imul(hash ^ char.charCodeAt(0), 0x01000193) >>> 0;
  return new Random(hash);
}

const SENTINEL = "@@fuzz-literal@@";

/** A valid body with raw JSON text at `path` (for literals JSON.stringify cannot write: 1e400, -0, "\ud800"). */
function withLiteral(body: unknown, path: Path, literal: string): string {
  return JSON.stringify(replaceAt(body, path, SENTINEL)).replace(JSON.stringify(SENTINEL), literal);
}

const HUGE_NUMBERS = [
  "1e308",
  "-1e308",
  "-0",
  "9007199254740993",
  "-9007199254740993",
  `1${"0".repeat(400)}`,
  "1e400",
  "-1e400",
  "1e-400",
  "1.0",
  "1E2",
  "0.1e1",
  "123456789012345678901234567890",
];
const ODD_STRINGS = [`"${"é".repeat(10_000)}"`, '"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"a\\nb"', '" "', '""'];
const MEGABYTE_STRING = `"${"x".repeat(1024 * 1024)}"`;

/** Every body a procedure gets in one run, in a fixed order for a given seed. */
function bodyCases(random: Random, procedure: AnyProcedure, hints: Hints, counts: Counts): BodyCase[] {
  const schema = procedure.body as JsonSchema;
  const cases: BodyCase[] = [];
  const valid = (full = false) => validValue(random, schema, { hints, full });
  const json = (label: string, body: unknown, extra: Partial<BodyCase> = {}) =>
    cases.push({ label, payload: JSON.stringify(body), ...extra });
  const raw = (label: string, payload: string | Buffer, extra: Partial<BodyCase> = {}) => cases.push({ label, payload, ...extra });
  const spots = (body: unknown, accept: (value: unknown) => boolean) => {
    const found = pathsIn(body).filter((path) => path.length > 0 && accept(valueAt(body, path)));
    return Array.from({ length: Math.min(counts.spots, found.length) }, () => random.pick(found));
  };
  const some = <T>(values: readonly T[]) => Array.from({ length: Math.min(counts.picks, values.length) }, () => random.pick(values));

  for (let i = 0; i < counts.valid; i++) json("valid body", valid(i % 2 === 0));

  let broken = violations(random, schema, hints);
  if (counts.violations !== undefined)
    broken = Array.from({ length: Math.min(counts.violations, broken.length) }, () => random.pick(broken));
  for (const violation of broken) json(violation.description, violation.body, { invalidAt: violation.location });

  for (let i = 0; i < counts.randomRoots; i++) json("random JSON", randomJson(random, 4));
  for (let i = 0; i < counts.mutations; i++) {
    const body = valid(true);
    const path = random.pick(pathsIn(body));
    json(`valid body with random JSON at ${path.join(".") || "the root"}`, replaceAt(body, path, randomJson(random, 3)));
  }

  const full = valid(true);
  for (const path of spots(full, (value) => typeof value === "number")) {
    for (const literal of some(HUGE_NUMBERS)) raw(`number ${literal.slice(0, 20)} at ${path.join(".")}`, withLiteral(full, path, literal));
  }
  const stringSpots = spots(full, (value) => typeof value === "string");
  for (const path of stringSpots) {
    for (const literal of some(ODD_STRINGS)) raw(`string ${literal.slice(0, 12)} at ${path.join(".")}`, withLiteral(full, path, literal));
    for (const name of some(PROTOTYPE_NAMES)) json(`prototype name '${name}' at ${path.join(".")}`, replaceAt(full, path, name));
  }
  for (const path of spots(full, (value) => Array.isArray(value) && value.length > 0)) {
    const items = valueAt(full, path) as unknown[];
    json(`duplicated items at ${path.join(".")}`, replaceAt(full, path, [...items, ...items]));
  }
  // Free-form objects (meta) are stored and sent back as they are: nesting there reaches the stores.
  for (const path of freeFormPaths(schema)) {
    for (const levels of [100, 101, 3_000])
      raw(`${levels} levels of nesting in ${path.join(".")}`, withLiteral(full, path, deeplyNested(levels, "object")));
  }
  if (!random.chance(counts.parsing)) return cases;

  // Prototype names as keys, in the root object (or the first item) and in one other object of a valid body.
  const objects = pathsIn(full).filter((path) => {
    const value = valueAt(full, path);
    return value !== null && typeof value === "object" && !Array.isArray(value);
  });
  for (const path of new Set([objects[0], random.pick(objects)].filter((path) => path !== undefined))) {
    for (const name of some(PROTOTYPE_NAMES)) {
      const object = JSON.stringify(valueAt(full, path));
      const injected = `{${JSON.stringify(name)}:{"admin":true}${object === "{}" ? "" : ","}${object.slice(1)}`;
      raw(`key '${name}' in ${path.join(".") || "the root"}`, withLiteral(full, path, injected));
    }
  }
  raw('{"constructor":{"prototype":{"admin":true}}}', '{"constructor":{"prototype":{"admin":true}}}');

  // Deep nesting, as the whole body and in place of a value; the heaviest inputs (tens of ms each) less often.
  raw("arrays nested 10000 deep", deeplyNested(10_000, "array"));
  raw("objects nested 10000 deep", deeplyNested(10_000, "object"));
  for (const path of spots(full, () => true).slice(0, 1))
    raw(`objects nested 10000 deep at ${path.join(".")}`, withLiteral(full, path, deeplyNested(10_000, "object")));
  if (random.chance(0.3)) {
    raw("arrays nested 100000 deep", deeplyNested(100_000, "array"));
    raw("objects nested 100000 deep", deeplyNested(100_000, "object"));
    for (const path of stringSpots.slice(0, 1)) raw(`a 1 MB string at ${path.join(".")}`, withLiteral(full, path, MEGABYTE_STRING));
  }

  // Bodies that are not JSON, or not declared as JSON.
  const text = JSON.stringify(full);
  raw("an empty body", "");
  raw("whitespace", " \n\t ");
  raw("a byte-order mark before the JSON", `\ufeff${text}`);
  raw("JSON followed by garbage", `${text}x`);
  raw("two JSON documents", `${text}${text}`);
  raw("a truncated JSON document", text.slice(0, Math.max(1, Math.floor(text.length / 2))));
  raw(
    "invalid UTF-8 bytes in a string",
    Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xe2, 0x82]), Buffer.from('"}')]),
  );
  raw("invalid UTF-8 bytes as the whole body", Buffer.from([0xff, 0xfe, 0xfd, 0x00, 0x80]));
  raw("UTF-16 text", Buffer.from(text, "utf16le"), { contentType: "application/json; charset=utf-16" });
  raw("a JSON body without Content-Type", text, { contentType: null });
  for (const contentType of [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "application/json-seq",
    "application/jsonx",
    "APPLICATION/JSON",
    "application/json; charset=latin1",
    "application/json;;;",
    "application/json, text/plain",
    "*/*",
    "",
    "\u00e9",
  ]) {
    raw(`Content-Type '${contentType}'`, text, { contentType });
  }
  return cases;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

async function send(h: Harness, procedure: string, body: BodyCase): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${ROOT_KEY}` };
  if (body.contentType !== null) headers["content-type"] = body.contentType ?? "application/json";
  const response = await h.app.inject({ method: "POST", url: `/v2/${procedure}`, headers, payload: body.payload });
  return { status: response.statusCode, headers: response.headers, body: response.body };
}

/** What is wrong with the answer to `body`, or undefined. */
function answerProblem(body: BodyCase, answer: Answer): string | undefined {
  const envelope = envelopeProblem(answer);
  if (envelope) return envelope;
  const name = errorName(answer.body);
  if (body.invalidAt !== undefined) {
    if (answer.status !== 400 || name !== "invalid_input") return `expected 400 invalid_input, got ${answer.status} ${name ?? ""}`;
    const locations: string[] = (JSON.parse(answer.body).error.errors ?? []).map((entry: { location: string }) => entry.location);
    if (!locations.includes(body.invalidAt)) return `errors[] does not name ${body.invalidAt} (it names ${locations.join(", ")})`;
  }
  return undefined;
}

/** Existing records of every kind, so valid bodies reach the stores instead of stopping at "not found". */
async function createFixtures(h: Harness): Promise<Hints> {
  const ok = async (procedure: string, body: unknown) => {
    const result = await h.call(procedure, body);
    if (result.status !== 200) throw new Error(`${procedure} failed: ${JSON.stringify(result.body)}`);
    return result.body.data;
  };
  const { apiId } = await ok("apis.createApi", { name: "fuzz" });
  await ok("permissions.createPermission", { name: "fuzz read", slug: "fuzz.read" });
  const { roleId } = await ok("permissions.createRole", { name: "fuzz_role", permissions: ["fuzz.read"] });
  await ok("identities.createIdentity", {
    externalId: "fuzz_identity",
    ratelimits: [{ name: "fuzz_limit", limit: 10, duration: 60_000, autoApply: true }],
  });
  const { key, keyId } = await ok("keys.createKey", {
    apiId,
    externalId: "fuzz_identity",
    roles: ["fuzz_role"],
    permissions: ["fuzz.read"],
    credits: { remaining: 1_000, refill: { interval: "daily", amount: 10 } },
    ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: true }],
    meta: { plan: "fuzz" },
  });
  await ok("ratelimit.limit", { namespace: "fuzz_ns", identifier: "fuzz_user", limit: 10, duration: 60_000 });
  await ok("ratelimit.setOverride", { namespace: "fuzz_ns", identifier: "fuzz_user", limit: 5, duration: 60_000 });
  return {
    apiId: [apiId],
    keyId: [keyId],
    key: [key],
    externalId: ["fuzz_identity"],
    identity: ["fuzz_identity"],
    permission: ["fuzz.read"],
    permissions: ["fuzz.read"],
    role: ["fuzz_role", roleId],
    roleId: [roleId],
    roles: ["fuzz_role"],
    name: ["requests", "fuzz_limit"],
    namespace: ["fuzz_ns"],
    identifier: ["fuzz_user"],
  };
}

/** Deleting procedures go last, so the others still find the fixtures. */
function destructiveLast(procedures: readonly AnyProcedure[]): AnyProcedure[] {
  const destructive = (procedure: AnyProcedure) => /\.(delete|reroll)/.test(procedure.name);
  return [...procedures.filter((p) => !destructive(p)), ...procedures.filter(destructive)];
}

async function fuzzProcedures(t: Test, storage: StorageKind, counts: Counts): Promise<void> {
  // A generous Redis deadline: this test is about input, and a loaded machine must not turn a slow call into a 500.
  const redis = () => ({ storage: { redis: { url: REDIS_URL, prefix: uniquePrefix(t, "fuzz"), commandTimeoutMs: 10_000 } } });
  const h = await harness(t, storage === "redis" ? { storage, config: redis() } : { storage });
  const hints = await createFixtures(h);
  let total = 0;
  for (const procedure of destructiveLast(PROCEDURES)) {
    const cases = bodyCases(randomFor(procedure.name, storage === "memory" ? 0 : 1), procedure, hints, counts);
    const problems: string[] = [];
    for (const body of cases) {
      const answer = await send(h, procedure.name, body);
      const problem = answerProblem(body, answer);
      if (problem)
        problems.push(
          `${body.label}: ${problem} | sent ${excerpt(body.payload)}${body.contentType !== undefined ? ` as ${JSON.stringify(body.contentType)}` : ""} | got ${answer.status} ${excerpt(answer.body)}`,
        );
    }
    total += cases.length;
    report(t, problems, `${procedure.name}: ${cases.length} bodies, each answered in the envelope without a 5xx`);
  }
  t.comment(`${total} bodies on ${storage} stores`);
}

t.test(`every /v2 procedure answers any body in the envelope and never with a 5xx (memory stores, FUZZ_SEED=${SEED})`, async (t) => {
  await fuzzProcedures(t, "memory", MEMORY_COUNTS);
});

t.test(`the same, shorter, on Redis stores, where validation and storage can differ (FUZZ_SEED=${SEED})`, async (t) => {
  await fuzzProcedures(t, "redis", REDIS_COUNTS);
});

/** One HTTP/1.1 request as bytes, exactly as given (no header is added or fixed). */
function request(method: string, target: string, headers: readonly string[], body: string | Buffer = ""): Buffer {
  return Buffer.concat([
    Buffer.from(`${method} ${target} HTTP/1.1\r\n${headers.map((line) => `${line}\r\n`).join("")}\r\n`, "latin1"),
    Buffer.isBuffer(body) ? body : Buffer.from(body),
  ]);
}

t.test("framing a client library would not send is answered in the envelope over a real socket, never with a 5xx", async (t) => {
  const h = await harness(t);
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const auth = `Authorization: Bearer ${ROOT_KEY}`;
  const body = JSON.stringify({ name: "framing" });
  const post = (headers: string[], payload: string | Buffer = body, target = "/v2/apis.createApi") =>
    request("POST", target, ["Host: keygate", auth, ...headers], payload);
  const json = "Content-Type: application/json";

  interface FramingCase {
    label: string;
    bytes: Buffer;
    /** Answers expected; fewer is a failure unless `mayClose` (the server may end a connection it cannot read). */
    answers: number;
    methods?: string[];
    endAfterWrite?: boolean;
    mayClose?: boolean;
  }
  const cases: FramingCase[] = [
    { label: "a well-formed request", bytes: post([json, `Content-Length: ${body.length}`]), answers: 1 },
    {
      label: "invalid UTF-8 bytes in the body",
      bytes: post(
        [json, "Content-Length: 14"],
        Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xc0, 0xaf, 0x22, 0x7d]),
      ),
      answers: 1,
    },
    {
      label: "Content-Length larger than the body, then the end of the stream",
      bytes: post([json, `Content-Length: ${body.length + 50}`]),
      answers: 1,
      endAfterWrite: true,
      mayClose: true,
    },
    {
      label: "Content-Length smaller than the body (the rest is not a request)",
      bytes: post([json, `Content-Length: ${body.length - 3}`]),
      answers: 2,
      mayClose: true,
    },
    { label: "Content-Length that is not a number", bytes: post([json, "Content-Length: abc"]), answers: 1, mayClose: true },
    { label: "a negative Content-Length", bytes: post([json, "Content-Length: -1"]), answers: 1, mayClose: true },
    {
      label: "two different Content-Lengths",
      bytes: post([json, `Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "both Content-Length and Transfer-Encoding",
      bytes: post(
        [json, `Content-Length: ${body.length}`, "Transfer-Encoding: chunked"],
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      ),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a well-formed chunked body",
      bytes: post([json, "Transfer-Encoding: chunked"], `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`),
      answers: 1,
    },
    {
      label: "a chunk size that is not hexadecimal",
      bytes: post([json, "Transfer-Encoding: chunked"], `zz\r\n${body}\r\n0\r\n\r\n`),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a chunk size larger than the chunk, then the end of the stream",
      bytes: post([json, "Transfer-Encoding: chunked"], `ff\r\n${body}\r\n0\r\n\r\n`),
      answers: 1,
      endAfterWrite: true,
      mayClose: true,
    },
    {
      label: "a chunk size beyond 64 bits",
      bytes: post([json, "Transfer-Encoding: chunked"], `ffffffffffffffffffff\r\n${body}\r\n0\r\n\r\n`),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a chunked body without its last chunk, then the end of the stream",
      bytes: post([json, "Transfer-Encoding: chunked"], `${body.length.toString(16)}\r\n${body}\r\n`),
      answers: 1,
      endAfterWrite: true,
      mayClose: true,
    },
    { label: "Transfer-Encoding that is not chunked", bytes: post([json, "Transfer-Encoding: gzip"], body), answers: 1, mayClose: true },
    {
      label: "a header line without a colon",
      bytes: post([json, `Content-Length: ${body.length}`, "this is not a header"]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a header name with a space",
      bytes: post([json, `Content-Length: ${body.length}`, "Bad Name: x"]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a control character in a header value",
      bytes: post([json, `Content-Length: ${body.length}`, "X-Odd: a\u0001b"]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "an obsolete folded header line",
      bytes: post([json, `Content-Length: ${body.length}`, "X-Folded: a", " b"]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a 1 MB header",
      bytes: post([json, `Content-Length: ${body.length}`, `X-Big: ${"a".repeat(1024 * 1024)}`]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "10,000 headers",
      bytes: post([json, `Content-Length: ${body.length}`, ...Array.from({ length: 10_000 }, (_, i) => `X-H${i}: ${i}`)]),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a bad percent-encoding in the path",
      bytes: post([json, `Content-Length: ${body.length}`], body, "/v2/apis.createApi%"),
      answers: 1,
    },
    {
      label: "a bad percent-encoding in the query",
      bytes: post([json, `Content-Length: ${body.length}`], body, "/v2/apis.createApi?x=%zz"),
      answers: 1,
    },
    {
      label: "an encoded NUL in the path",
      bytes: post([json, `Content-Length: ${body.length}`], body, "/v2/apis.createApi%00"),
      answers: 1,
    },
    {
      label: "a path with dot segments",
      bytes: post([json, `Content-Length: ${body.length}`], body, "/v2/../v2/apis.createApi"),
      answers: 1,
    },
    {
      label: "an absolute-form target",
      bytes: post([json, `Content-Length: ${body.length}`], body, "http://keygate/v2/apis.createApi"),
      answers: 1,
    },
    { label: "Expect: 100-continue", bytes: post([json, `Content-Length: ${body.length}`, "Expect: 100-continue"]), answers: 1 },
    { label: "an Expect the server does not know", bytes: post([json, `Content-Length: ${body.length}`, "Expect: teapot"]), answers: 1 },
    {
      label: "no Host header",
      bytes: request("POST", "/v2/apis.createApi", [auth, json, `Content-Length: ${body.length}`], body),
      answers: 1,
      mayClose: true,
    },
    {
      label: "an HTTP/1.0 request",
      bytes: Buffer.from(`POST /v2/apis.createApi HTTP/1.0\r\n${auth}\r\n${json}\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
      answers: 1,
    },
    {
      label: "an unknown HTTP version",
      bytes: Buffer.from(`POST /v2/apis.createApi HTTP/9.9\r\n${auth}\r\n\r\n`),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a lower-case method",
      bytes: request("post", "/v2/apis.createApi", ["Host: keygate", auth, json, `Content-Length: ${body.length}`], body),
      answers: 1,
      mayClose: true,
    },
    {
      label: "a method Node does not know",
      bytes: request("FROB", "/v2/apis.createApi", ["Host: keygate", auth, "Content-Length: 0"]),
      answers: 1,
      mayClose: true,
    },
    { label: "a request line of garbage", bytes: Buffer.from("\u0000\u0001\u0002 garbage\r\n\r\n", "latin1"), answers: 1, mayClose: true },
    {
      label: "three pipelined requests: valid, not JSON, valid",
      bytes: Buffer.concat([
        post([json, `Content-Length: ${body.length}`]),
        post([json, "Content-Length: 5"], "{nope"),
        post([json, `Content-Length: ${body.length}`]),
      ]),
      answers: 3,
    },
    {
      label: "pipelined requests after a GET with a body",
      bytes: Buffer.concat([
        request("GET", "/v2/liveness", ["Host: keygate", "Content-Length: 4"], "abcd"),
        post([json, `Content-Length: ${body.length}`]),
      ]),
      answers: 2,
      methods: ["GET", "POST"],
    },
    {
      label: "a HEAD of a procedure",
      bytes: request("HEAD", "/v2/apis.createApi", ["Host: keygate", auth]),
      answers: 1,
      methods: ["HEAD"],
    },
  ];

  const problems: string[] = [];
  for (const framing of cases) {
    const exchange = await rawExchange(port, framing.bytes, {
      responses: framing.answers,
      ...defined({ methods: framing.methods, endAfterWrite: framing.endAfterWrite }),
    });
    exchange.responses.forEach((answer, index) => {
      const problem = envelopeProblem({ ...answer, head: framing.methods?.[index] === "HEAD" });
      if (problem) problems.push(`${framing.label}: answer ${index + 1}: ${problem} | got ${answer.status} ${excerpt(answer.body)}`);
    });
    // A server may close after an answer that says so (Connection: close), as Fastify does after a body it cannot parse.
    const announcedClose = /close/i.test(exchange.responses.at(-1)?.headers.connection ?? "");
    if (exchange.responses.length < framing.answers && !((framing.mayClose || announcedClose) && exchange.closedByServer)) {
      problems.push(
        `${framing.label}: ${exchange.responses.length} of ${framing.answers} answers${exchange.closedByServer ? ", then the server closed" : ", then nothing"}; unparsed: ${excerpt(exchange.rest)}`,
      );
    }
  }
  report(t, problems, `${cases.length} framings, every answer in the envelope without a 5xx`);
});
