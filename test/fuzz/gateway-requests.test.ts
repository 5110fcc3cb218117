import type { AddressInfo } from "node:net";
import t from "tap";
import { samePath } from "../../src/http/request-target.js";
import { envelopeProblem, excerpt, report } from "../helpers/envelope.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { fuzzSeed, Random } from "../helpers/fuzz.js";
import { harness } from "../helpers/harness.js";
import { type RawExchange, type RawResponse, rawExchange } from "../helpers/raw-http.js";
import { type SeenRequest, startUpstream, type Upstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

/*
 * Requests of every shape through the gateway, over real sockets: odd paths (dot segments, encodings, NUL,
 * non-ASCII, very long), methods, headers (duplicates, casing, invalid characters, hop-by-hop, huge, many) and
 * framing (chunked, truncated, pipelined, Content-Length with Transfer-Encoding). Whatever comes in: no 5xx
 * (the upstreams are healthy), every answer keygate makes itself is in the envelope with x-request-id, a
 * request reaches only the upstream of the route it matched, and the key's credits drop by exactly the number
 * of requests its route's upstream received: nothing is charged for a refused request.
 *
 * The run is seeded: the seed is printed, and FUZZ_SEED=<seed> runs the same requests again.
 */

const SEED = fuzzSeed();
t.comment(`fuzz seed ${SEED}: FUZZ_SEED=${SEED} npx tap build/test/fuzz/gateway-requests.test.js runs these requests again`);

const REQUESTS = 250;
const API = "api_fuzz_gateway";
const BALANCE = 1_000_000;

/** The API keys the requests carry: one for every request, and one for requests the client abandons mid-body. */
interface Keys {
  main: string;
  abandoning: string;
}

/** One request to send as bytes, and what may happen to it. */
interface Plan {
  method: string;
  target: string;
  /** Header lines as written, in order. */
  headers: string[];
  body: string;
  /** The request is malformed at the HTTP level: the server may answer it and close, or just close. */
  malformed: boolean;
  /** The body is cut short and the client half-closes: there may be no answer at all. */
  truncated: boolean;
}

/** Path pieces that change nothing, and hostile ones: dot segments plain and encoded, encoded slashes and NULs, bad escapes, non-ASCII. */
const PLAIN_SEGMENTS = ["a", "items", "42", "v1", "x-y_z", "~user"];
const HOSTILE_SEGMENTS = [
  ".",
  "..",
  "%2e",
  "%2e%2e",
  "%2E%2E",
  ".%2e",
  "%2e.",
  "..;",
  "%2f",
  "..%2f",
  "%2F..",
  "%5c..",
  "..\\",
  "%00",
  "a%00b",
  "%",
  "%zz",
  "%c0%ae%c0%ae",
  "%ff",
  "%C3%A9",
  ";a=b",
  "",
  "*",
  "@",
  ":",
  "a:b",
  "a".repeat(2_000),
];
/** Raw bytes a client should have percent-encoded: the server may refuse the request line. */
const RAW_SEGMENTS = ["\u00c3\u00a9", "\u00ff", "a b", "a\tb"];
const ODD_PREFIXES = [
  "/v2",
  "/v2/apis.createApi",
  "",
  "/",
  "/nowhere",
  "/CREDITS",
  "/credits-x",
  "/creditsx",
  "//credits",
  "/./credits",
  "/other/../credits",
  "/credits/../other",
  "/q/../credits",
  "/%63redits",
  "/credits%2f..%2fother",
  "*",
];
const QUERIES = ["?a=1", "?%", "?a=%zz", "?a=1&a=2", "?", "??", "?#x", "#frag", `?${"x".repeat(9_000)}`, "?api_key=", "?a=%00"];

/** Header lines that a well-behaved request might carry, or that probe hop-by-hop handling, forgery and odd values. */
const HEADER_TWISTS: readonly (readonly string[])[] = [
  ["Connection: close"],
  ["Connection: keep-alive"],
  ["Connection: x-custom", "X-Custom: 1"],
  ["Keep-Alive: timeout=1"],
  ["Upgrade: h2c"],
  ["Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"],
  ["TE: trailers"],
  ["TE: gzip"],
  ["Trailer: X-Checksum"],
  ["Proxy-Authorization: Basic dXNlcjpwYXNz"],
  ["Proxy-Connection: keep-alive"],
  ["Expect: 100-continue"],
  ["Expect: teapot"],
  ["X-Forwarded-For: not-an-address, , 10.0.0.1"],
  ["X-Forwarded-Host: evil.example"],
  ["Forwarded: for=evil;proto=https"],
  ["X-Keygate-Key-Id: key_forged"],
  ["Content-Type: application/json; charset=utf-8"],
  ["Content-Type: \u00e9/\u00e9"],
  ["Accept-Encoding: gzip, br, zstd"],
  ["Cookie: a=b; __proto__=x"],
  ["X-Latin1: caf\u00e9"],
  ["__proto__: x", "constructor: y"],
  ["Host: second.example"],
  [`X-Long: ${"v".repeat(8_000)}`],
  Array.from({ length: 300 }, (_, i) => `X-Many-${i}: ${i}`),
];
/** Header lines that break HTTP: the server may answer 4xx and close. */
const MALFORMED_HEADERS: readonly (readonly string[])[] = [
  ["X-Control: a\u0001b"],
  ["X-Del: a\u007fb"],
  ["Bad Name: x"],
  ["X-Folded: a", " folded"],
  ["no colon here"],
  [`X-Huge: ${"h".repeat(64 * 1024)}`],
  Array.from({ length: 10_000 }, (_, i) => `X-H${i}: ${i}`),
];

/**
 * A request that would be served as it stands (a route, its key where the route reads it, a Host), with zero to
 * three twists: a hostile path segment or prefix, an odd query, a strange method, extra or malformed headers, a
 * key sent wrongly, or framing that is odd or broken.
 */
function plan(random: Random, keys: Keys): Plan {
  let method = random.pick(["GET", "GET", "GET", "POST", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]);
  let prefix = random.pick(["/credits", "/credits", "/credits", "/other", "/q"]);
  const segments = Array.from({ length: random.int(0, 2) }, () => random.pick(PLAIN_SEGMENTS));
  let query = "";
  let keyPlace: "route" | "none" | "wrong" | "twice" | "odd" = "route";
  const headers: string[] = ["Host: keygate.test"];
  let body = method === "POST" || method === "PUT" ? '{"hello":"world"}' : "";
  let framing: "length" | "chunked" | "bad-chunk" | "both" | "truncated" | "bad-length" = "length";
  let malformed = false;

  for (let twists = random.pick([0, 1, 1, 2, 3]); twists > 0; twists--) {
    switch (random.int(0, 9)) {
      case 0:
      case 1:
        segments.splice(random.int(0, segments.length), 0, random.pick(HOSTILE_SEGMENTS));
        break;
      case 2:
        if (random.chance(0.8)) prefix = random.pick(ODD_PREFIXES);
        else {
          segments.push(random.pick(RAW_SEGMENTS));
          malformed = true;
        }
        break;
      case 3:
        query = random.pick(QUERIES);
        break;
      case 4:
        if (random.chance(0.1)) segments.push("p".repeat(random.pick([9_000, 70_000])));
        else method = random.pick(["TRACE", "PROPFIND", "M-SEARCH", "CONNECT", "get", "FOO", "G ET"]);
        break;
      case 5:
      case 6:
        headers.push(...random.pick(HEADER_TWISTS));
        break;
      case 7:
        if (random.chance(0.5)) headers.push(...random.pick(MALFORMED_HEADERS));
        // biome-ignore lint/suspicious/noDuplicateElseIf: each call draws a new random number
        else if (random.chance(0.5)) headers.splice(0, 1);
        else headers.push(random.pick(["Host: one", "Host: a:b:c", "Host: \u00e9"]));
        malformed = true;
        break;
      case 8:
        keyPlace = random.pick(["none", "wrong", "twice", "odd"]);
        break;
      default:
        framing = random.pick(["chunked", "bad-chunk", "both", "truncated", "bad-length"]);
        body ||= "hello";
        break;
    }
  }
  if (!["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "PROPFIND", "M-SEARCH", "CONNECT"].includes(method))
    malformed = true;

  // A request the client abandons mid-body pays with its own key (see the test).
  const key = framing === "truncated" && body !== "" ? keys.abandoning : keys.main;
  let target = `${prefix}${segments.map((segment) => `/${segment}`).join("")}` || "/";
  const keyHeader = prefix.startsWith("/other") ? "X-Api-Key" : "Authorization";
  const keyValue = keyHeader === "Authorization" ? `Bearer ${key}` : key;
  if (prefix.startsWith("/q")) {
    if (keyPlace !== "none")
      query += `${query.startsWith("?") ? "&" : "?"}api_key=${keyPlace === "wrong" ? "sk_not_a_key" : key}${keyPlace === "twice" ? "&api_key=sk_other" : ""}`;
  } else if (keyPlace === "route") headers.push(`${keyHeader}: ${keyValue}`);
  else if (keyPlace === "wrong") headers.push(`${keyHeader}: ${keyHeader === "Authorization" ? "Bearer sk_not_a_key" : "sk_not_a_key"}`);
  else if (keyPlace === "twice")
    headers.push(`${keyHeader}: ${keyValue}`, `${keyHeader}: ${keyHeader === "Authorization" ? "Bearer sk_other" : "sk_other"}`);
  else if (keyPlace === "odd")
    headers.push(
      random.pick([
        `${keyHeader.toUpperCase()}: ${keyValue}`,
        `aUtHoRiZaTiOn: Bearer ${key}`,
        `Authorization: bearer ${key}`,
        `Authorization: Bearer  ${key} `,
        `Authorization: Bearer ${key}, Bearer x`,
      ]),
    );
  target += query;

  let truncated = false;
  if (body !== "") {
    switch (framing) {
      case "length":
        headers.push(`Content-Length: ${Buffer.byteLength(body)}`);
        break;
      case "chunked":
        headers.push("Transfer-Encoding: chunked");
        body = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
        break;
      case "bad-chunk":
        headers.push("Transfer-Encoding: chunked");
        body = random.pick([
          "zz\r\nhello\r\n0\r\n\r\n",
          "ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
          "5\r\nhelloXX0\r\n\r\n",
          "-1\r\nhello\r\n0\r\n\r\n",
          `5;${"e".repeat(20_000)}\r\nhello\r\n0\r\n\r\n`,
        ]);
        malformed = true;
        break;
      case "both":
        headers.push(`Content-Length: ${Buffer.byteLength(body)}`, "Transfer-Encoding: chunked");
        malformed = true;
        break;
      case "truncated":
        headers.push(random.pick([`Content-Length: ${Buffer.byteLength(body) + 50}`, "Transfer-Encoding: chunked"]));
        truncated = true;
        break;
      case "bad-length":
        headers.push(
          random.pick([
            "Content-Length: abc",
            "Content-Length: -1",
            "Content-Length: 1, 2",
            "Transfer-Encoding: gzip, chunked",
            "Transfer-Encoding: chunked, gzip",
          ]),
        );
        malformed = true;
        break;
    }
  }
  return { method, target, headers, body, malformed, truncated };
}

function bytes(request: Plan): Buffer {
  return Buffer.from(
    `${request.method} ${request.target} HTTP/1.1\r\n${request.headers.map((line) => `${line}\r\n`).join("")}\r\n${request.body}`,
    "latin1",
  );
}

/** The request as a one-line excerpt, keys replaced by their names. */
function describe(request: Plan, keys: Keys): string {
  const text = `${request.method} ${request.target} [${request.headers.join(" | ")}]${request.body ? ` body ${JSON.stringify(request.body)}` : ""}`;
  return excerpt(text.replaceAll(keys.main, "<key>").replaceAll(keys.abandoning, "<abandoning key>"), 400);
}

/** Headers for one connection only, as the twists send them (X-Custom and HTTP2-Settings are named by Connection). */
const HOP_BY_HOP = [
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "proxy-authorization",
  "proxy-connection",
  "expect",
  "x-custom",
  "http2-settings",
];

/** The upstream's own answers are JSON with the request it saw; everything else was made by keygate. */
function fromUpstream(answer: RawResponse): boolean {
  try {
    const body = JSON.parse(answer.body.toString());
    return typeof body?.method === "string" && typeof body?.url === "string" && body.meta === undefined;
  } catch {
    return false;
  }
}

/** The path an upstream serves: dot segments resolved, escaped unreserved characters decoded (RFC 3986 6.2.2). */
function resolvedPath(url: string): string {
  try {
    return samePath(new URL(url, "http://upstream.test").pathname);
  } catch {
    return url;
  }
}

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}

/** Mostly one request per connection; sometimes a pipelined group of well-formed ones. */
function nextGroup(random: Random, keys: Keys): Plan[] {
  const group = random.chance(0.1) ? random.int(2, 3) : 1;
  const requests: Plan[] = [];
  while (requests.length < group) {
    const next = plan(random, keys);
    if (
      group > 1 &&
      (next.malformed ||
        next.truncated ||
        next.method === "HEAD" ||
        next.headers.some((line) => /^connection:.*(close|upgrade)/i.test(line)))
    )
      continue;
    requests.push(next);
  }
  return requests;
}

/** What is wrong with the answers to `requests`, sent on one connection: a 5xx, an answer keygate made outside the envelope, answers missing. */
function answerProblems(requests: Plan[], exchange: RawExchange, label: string): string[] {
  const problems: string[] = [];
  exchange.responses.forEach((answer, index) => {
    if (answer.status >= 500) problems.push(`status ${answer.status}: ${label} | got ${excerpt(answer.body)}`);
    else if (answer.status === 101) return;
    else if (fromUpstream(answer)) {
      if (!/^req_/.test(answer.headers["x-request-id"] ?? "")) problems.push(`an upstream answer without x-request-id: ${label}`);
    } else {
      const problem = envelopeProblem({ ...answer, head: requests[index]?.method === "HEAD" });
      if (problem) problems.push(`answer ${index + 1}: ${problem}: ${label} | got ${answer.status} ${excerpt(answer.body)}`);
    }
  });
  // A server may end a connection after answering a request it cannot read, or after saying it will close.
  // A head over Node's 16 KB limit is refused (431) and the connection closed, with no answer when one is pending.
  const oversized = (request: Plan) => bytes(request).indexOf("\r\n\r\n") > 16 * 1024;
  const mayClose =
    requests.some((request) => request.malformed || request.truncated || oversized(request) || request.method === "CONNECT") ||
    /close/i.test(exchange.responses.at(-1)?.headers.connection ?? "");
  if (exchange.responses.length < requests.length && !(mayClose && exchange.closedByServer)) {
    problems.push(
      `${exchange.responses.length} of ${requests.length} answers${exchange.closedByServer ? ", then the server closed" : " in 5 s"}: ${label} | unparsed: ${excerpt(exchange.rest)}`,
    );
  }
  return problems;
}

/** Requests an upstream got outside the routes that lead to it. */
function strayRequests(creditsUpstream: Upstream, otherUpstream: Upstream): string[] {
  return [
    ...creditsUpstream.seen
      .filter((request) => !under(resolvedPath(request.url), "/base/credits"))
      .map((request) => `the credits route's upstream got ${request.method} ${excerpt(request.url)}`),
    ...otherUpstream.seen
      .filter((request) => !under(resolvedPath(request.url), "/other") && !under(resolvedPath(request.url), "/q"))
      .map((request) => `the other routes' upstream got ${request.method} ${excerpt(request.url)}`),
  ];
}

/**
 * Hop-by-hop headers of the client (RFC 9110 §7.6.1) and the ones its Connection names that reached an upstream;
 * a relayed upgrade keeps its Upgrade, and HTTP/1.1 lets `TE: trailers` through a proxy (RFC 9110 §10.1.4).
 */
function leakedHopByHop(seen: SeenRequest[]): string[] {
  return seen.flatMap((request) => {
    const relayedUpgrade = /upgrade/i.test(String(request.headers.connection ?? ""));
    const allowed = (name: string) => (relayedUpgrade && name === "upgrade") || (name === "te" && request.headers.te === "trailers");
    const leaked = HOP_BY_HOP.filter((name) => request.headers[name] !== undefined && !allowed(name));
    return leaked.length > 0 ? [`${leaked.join(", ")} reached the upstream with ${request.method} ${excerpt(request.url, 80)}`] : [];
  });
}

t.test(
  `the gateway answers any request in the envelope or with its upstream's answer, and charges only what reached the upstream (FUZZ_SEED=${SEED})`,
  async (t) => {
    const creditsUpstream: Upstream = await startUpstream(t);
    const otherUpstream: Upstream = await startUpstream(t);
    const forward = { keyId: "x-keygate-key-id" };
    const h = await harness(t, {
      config: {
        apis: [{ id: API, name: "fuzz-gateway", workspaceId: "ws_test" }],
        routes: [
          {
            name: "credits",
            match: { prefix: "/credits" },
            upstream: `${creditsUpstream.url}/base`,
            apiId: API,
            credits: { cost: 1 },
            forward,
          },
          { name: "other", match: { prefix: "/other" }, upstream: otherUpstream.url, apiId: API, key: { header: "x-api-key" }, forward },
          {
            name: "query",
            match: { prefix: "/q", methods: ["GET", "POST"] },
            upstream: otherUpstream.url,
            apiId: API,
            key: { query: "api_key" },
            forward,
          },
        ],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const port = (h.app.server.address() as AddressInfo).port;
    const main = await createKey(h, API, { credits: { remaining: BALANCE } });
    const abandoning = await createKey(h, API, { credits: { remaining: BALANCE } });
    const keys: Keys = { main: main.key, abandoning: abandoning.key };

    // A key with a balance pays 1 credit per allowed verification unless the route sets another cost (as in
    // keys.verifyKey), so each request an upstream receives costs its key exactly 1. The upstreams learn the key
    // from x-keygate-key-id, which keygate sets itself (a forged one is replaced).
    const spent = async (keyId: string) => BALANCE - (await getKey(h, keyId)).credits.remaining;
    const received = (keyId: string) =>
      [...creditsUpstream.seen, ...otherUpstream.seen].filter((request) => request.headers["x-keygate-key-id"] === keyId).length;

    const random = new Random(SEED);
    const problems: string[] = [];
    const balanceProblems: string[] = [];
    let answered = 0;
    let sent = 0;
    /** Credits the main key spent minus requests the upstreams received with it, so far: 0 when all is well. */
    let drift = 0;
    while (sent < REQUESTS) {
      const requests = nextGroup(random, keys);
      sent += requests.length;
      const exchange = await rawExchange(port, Buffer.concat(requests.map(bytes)), {
        responses: requests.length,
        methods: requests.map((request) => request.method),
        endAfterWrite: requests.some((request) => request.truncated),
      });
      answered += exchange.responses.length;
      const label = requests.map((request) => describe(request, keys)).join(" then ");
      problems.push(...answerProblems(requests, exchange, label));

      // The main key's credits follow what reached the upstreams; a request still under way settles within the
      // bound. A malformed or truncated body can break the forwarding after the upstream saw the request: its
      // credits are given back, so it may cost less than it reached, never more.
      const brokenBody = requests.some((request) => request.malformed || request.truncated);
      const difference = async () => (await spent(main.keyId)) - received(main.keyId);
      const settled = await waitFor(
        `the main key's credits spent minus the requests the upstreams received with it is ${drift}${brokenBody ? " or less" : ""}`,
        5_000,
        async (because) => {
          const current = await difference();
          because(`it is ${current}`);
          return current === drift || (brokenBody && current < drift) ? current : undefined;
        },
      ).catch((error: Error) => {
        balanceProblems.push(`${error.message}: ${label}`);
        return undefined;
      });
      // Each request that changes the difference is named once: the difference is then carried forward.
      drift = settled ?? (await difference());
    }

    report(t, problems, `${sent} requests (${answered} answers), none a 5xx, every answer keygate made in the envelope`);
    report(
      t,
      balanceProblems,
      `the credits the main key spent equal the requests the upstreams received with it (${received(main.keyId)})`,
    );
    // A request abandoned mid-body races the upstream's answer: it stays paid for when the upstream answered first
    // and is given back when the forwarding failed first. Either way it never costs more than what was received.
    const abandonedSpent = await waitFor("requests abandoned mid-body cost at most what reached the upstreams", 10_000, async (because) => {
      const current = await spent(abandoning.keyId);
      because(`${current} spent, ${received(abandoning.keyId)} received`);
      return current <= received(abandoning.keyId) ? current : undefined;
    });
    t.ok(
      abandonedSpent <= received(abandoning.keyId),
      `requests abandoned mid-body cost at most what reached the upstreams (${abandonedSpent} spent, ${received(abandoning.keyId)} received)`,
    );
    report(
      t,
      strayRequests(creditsUpstream, otherUpstream),
      "every request reached only the upstream of the route its path matched, dot segments resolved",
    );
    report(t, leakedHopByHop([...creditsUpstream.seen, ...otherUpstream.seen]), "no hop-by-hop header of the client reached an upstream");
  },
);
