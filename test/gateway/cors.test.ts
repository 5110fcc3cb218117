import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { createKey } from "../helpers/fixtures.js";
import { type Harness, harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";

// A route's cors policy over real sockets: preflights answered by keygate without a key and without the upstream,
// the CORS headers on the upstream's answers (its own replaced) and on keygate's refusals alike.

const API = "api_cors";
const APP = "https://app.example.test";

/** An upstream that answers with CORS headers of its own, which the route's policy replaces. */
async function corsUpstream(t: Test): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((request, response) => {
    requests++;
    request.resume();
    response
      .writeHead(200, {
        "access-control-allow-origin": "*",
        "access-control-max-age": "5",
        vary: "Accept-Encoding",
        "content-type": "text/plain",
      })
      .end("upstream");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function setup(t: Test, storage: (typeof STORAGE_KINDS)[number]) {
  const upstream = await startUpstream(t);
  const own = await corsUpstream(t);
  const h: Harness = await harness(t, {
    storage,
    config: {
      apis: [{ id: API, name: "cors", workspaceId: WORKSPACE }],
      routes: [
        {
          name: "public-docs",
          match: { prefix: "/docs", methods: ["GET"] },
          upstream: upstream.url,
          workspaceId: WORKSPACE,
          cors: { allowOrigins: "*", allowCredentials: true },
        },
        { name: "own-cors", match: { prefix: "/own" }, upstream: own.url, workspaceId: WORKSPACE, cors: { allowOrigins: "*" } },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const send = async (method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const response = await fetch(`${base}${path}`, { method, headers });
    return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
  };
  return { h, upstream: upstream as Upstream, own, send };
}

const corsHeaders = (answer: Answer) => Object.keys(answer.headers).filter((name) => name.startsWith("access-control-"));

for (const storage of STORAGE_KINDS) {
  t.test(`cors policies on ${storage} stores`, async (t) => {
    const s = await setup(t, storage);
    const { key } = await createKey(s.h, API);
    const created = await s.h.call("keygate.createRoute", {
      name: "orders",
      match: { prefix: "/orders", methods: ["GET"] },
      upstream: s.upstream.url,
      policies: [
        {
          name: "browsers",
          enabled: true,
          cors: {
            allowOrigins: [{ exact: APP }, { regex: "https://[a-z]+\\.preview\\.example\\.test" }],
            allowCredentials: true,
            maxAgeSeconds: 600,
            exposeHeaders: ["X-Trace"],
          },
        },
        { name: "auth", enabled: true, keyauth: { keyspaces: [API] } },
        { name: "per address", enabled: true, ratelimit: { limit: 1, windowMs: 60_000, identifiers: [{ remoteIp: {} }] } },
      ],
    });
    t.equal(created.status, 200, JSON.stringify(created.body));
    const preflight = (origin: string) =>
      s.send("OPTIONS", "/orders/1", { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization" });

    await t.test("a preflight is answered by keygate, without a key, on a route that takes only GET", async (t) => {
      const before = s.upstream.seen.length;
      const answer = await preflight(APP);
      t.equal(answer.status, 204);
      t.match(answer.headers, {
        "access-control-allow-origin": APP,
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET",
        "access-control-allow-headers": "authorization",
        "access-control-max-age": "600",
        "x-request-id": /^req_/,
      });
      t.match(answer.headers.vary, /Origin/);
      t.equal((await preflight("https://feature.preview.example.test")).status, 204, "an origin a regex matches");
      t.equal(s.upstream.seen.length, before, "the upstream saw no preflight");
      const other = await preflight("https://evil.test");
      t.equal(other.status, 403, "another origin's preflight is refused");
      t.same(corsHeaders(other), [], "with no CORS header at all");
      t.equal((await preflight("https://x.preview.example.test.evil.test")).status, 403, "a regex matches the whole origin");
      t.equal((await s.send("OPTIONS", "/orders/1")).status, 405, "a plain OPTIONS is still not a method of the route");
    });

    await t.test("refusals carry the CORS headers: 401 without a key, 429 over the limit", async (t) => {
      const missing = await s.send("GET", "/orders/1", { origin: APP });
      t.equal(missing.status, 401);
      t.equal(missing.headers["access-control-allow-origin"], APP);
      t.equal(missing.headers["access-control-allow-credentials"], "true");
      t.match(missing.headers["access-control-expose-headers"], /x-request-id.*retry-after, x-trace/);
      t.match(JSON.parse(missing.body), { error: { status: 401 } });
      const allowed = await s.send("GET", "/orders/1", { origin: APP, authorization: `Bearer ${key}` });
      t.equal(allowed.status, 200);
      t.equal(allowed.headers["access-control-allow-origin"], APP);
      const limited = await s.send("GET", "/orders/1", { origin: APP, authorization: `Bearer ${key}` });
      t.equal(limited.status, 429);
      t.equal(limited.headers["access-control-allow-origin"], APP);
      t.ok(limited.headers["retry-after"]);
      const stranger = await s.send("GET", "/orders/1", { origin: "https://evil.test" });
      t.equal(stranger.status, 401, "another origin's request is answered as before...");
      t.same(corsHeaders(stranger), [], "...without CORS headers");
      t.equal(stranger.headers.vary, "Origin");
    });

    await t.test("'*' with credentials names the origin; without them it is '*', and the upstream's own are replaced", async (t) => {
      const docs = await s.send("GET", "/docs/x", { origin: "https://anyone.test" });
      t.equal(docs.status, 200, "a public route");
      t.equal(docs.headers["access-control-allow-origin"], "https://anyone.test");
      const docsPreflight = await s.send("OPTIONS", "/docs/x", { origin: "https://anyone.test", "access-control-request-method": "GET" });
      t.equal(docsPreflight.status, 204);
      t.equal(docsPreflight.headers["access-control-allow-methods"], "GET", "the route's methods by default");
      const own = await s.send("GET", "/own/x", { origin: "https://anyone.test" });
      t.equal(own.body, "upstream");
      t.equal(own.headers["access-control-allow-origin"], "*");
      t.equal(own.headers["access-control-max-age"], undefined, "the upstream's CORS headers are dropped");
      t.equal(own.headers.vary, "Accept-Encoding, Origin", "Origin joins the upstream's Vary");
      const ownPreflight = await s.send("OPTIONS", "/own/x", { origin: "https://anyone.test", "access-control-request-method": "DELETE" });
      t.equal(ownPreflight.status, 204);
      t.match(ownPreflight.headers["access-control-allow-methods"], /DELETE/, "every method for a route that lists none");
      t.equal(s.own.requests(), 1, "the upstream saw only the GET");
    });
  });
}

t.test("cors policies are validated through the API, each problem named by its field", async (t) => {
  const h = await harness(t);
  const create = (cors: unknown) =>
    h.call("keygate.createRoute", {
      name: "c",
      match: { prefix: "/c" },
      upstream: "http://127.0.0.1:9",
      policies: [{ name: "cors", enabled: true, cors }],
    });
  const invalid = async (cors: unknown, location: string) => {
    const answer = await create(cors);
    t.equal(answer.status, 400, JSON.stringify(answer.body));
    t.ok(
      (answer.body.error.errors as { location: string }[]).some((error) => error.location === location),
      `${location}: ${JSON.stringify(answer.body.error.errors)}`,
    );
  };
  await invalid({ allowOrigins: [{ regex: "(" }] }, "body.policies[0].cors.allowOrigins[0].regex");
  await invalid({ allowOrigins: [{ exact: "https://a.test", regex: "b" }] }, "body.policies[0].cors.allowOrigins[0]");
  await invalid({ allowOrigins: [] }, "body.policies[0].cors.allowOrigins");
  await invalid({ allowOrigins: "*", maxAgeSeconds: -1 }, "body.policies[0].cors.maxAgeSeconds");
  await invalid({ allowOrigins: "*", allowMethods: ["FETCH"] }, "body.policies[0].cors.allowMethods[0]");
  t.equal((await create({ allowOrigins: "*" })).status, 200);
});
