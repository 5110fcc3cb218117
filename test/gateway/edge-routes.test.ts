import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import type { GatewayRequestEvent } from "../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { assertError, assertInvalidAt } from "../helpers/assertions.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { rawExchange, rawRequest } from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

// A route's path and Host sent upstream (stripPrefix, rewrite, host), public routes of the file, and a route's
// bodyLimit, against real upstreams over real sockets.

const API = "api_edge_routes";
const LIMIT = 100_000;

for (const storage of STORAGE_KINDS) {
  t.test(`path, host, public routes and body limits on ${storage} stores`, async (t) => {
    const upstream = await startUpstream(t);
    const events: GatewayRequestEvent[] = [];
    const h = await harness(t, {
      storage,
      analytics: recordingAnalytics({ gatewayRequests: events }),
      config: {
        apis: [{ id: API, name: "edge-routes", workspaceId: WORKSPACE }],
        routes: [
          { name: "stripped", match: { prefix: "/api/v1" }, upstream: `${upstream.url}/base`, apiId: API, stripPrefix: true },
          {
            name: "rewritten",
            match: { prefix: "/users" },
            upstream: upstream.url,
            apiId: API,
            key: { query: "api_key" },
            stripPrefix: true,
            rewrite: { regex: "^/([^/]+)/posts$", replacement: "/posts/by/$1" },
            host: "client",
          },
          {
            name: "dots",
            match: { prefix: "/dots" },
            upstream: upstream.url,
            apiId: API,
            rewrite: { regex: "^/dots/(.*)$", replacement: "/.$1" },
          },
          {
            name: "health",
            match: { prefix: "/health" },
            upstream: upstream.url,
            workspaceId: WORKSPACE,
            namespaceLimits: [{ namespace: "health-per-ip", identifier: "ip", limit: 2, duration: 60_000 }],
          },
          { name: "uploads", match: { prefix: "/uploads" }, upstream: upstream.url, apiId: API, bodyLimit: LIMIT, credits: { cost: 1 } },
        ],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const port = (h.app.server.address() as AddressInfo).port;
    const base = `http://127.0.0.1:${port}`;
    const { key } = await createKey(h, API);
    const bearer = { authorization: `Bearer ${key}` };
    // The uploads route's key: its credits tell what was charged and given back.
    const uploads = await createKey(h, API, { credits: { remaining: 10 } });
    const uploader = { authorization: `Bearer ${uploads.key}` };
    const seen = async (path: string, headers: Record<string, string> = bearer) => {
      const response = await fetch(`${base}${path}`, { headers });
      t.equal(response.status, 200, path);
      return (await response.json()) as { url: string; headers: Record<string, string> };
    };

    await t.test("stripPrefix removes the route's prefix before the upstream's path goes in front", async (t) => {
      t.equal((await seen("/api/v1/orders/7?x=1&y=%2F")).url, "/base/orders/7?x=1&y=%2F", "the query string as sent");
      t.equal((await seen("/api/v1")).url, "/base", "the prefix alone is the upstream's path");
      t.equal((await seen("/api/v1/")).url, "/base/");
      t.equal((await seen("/api/v%31/a%20b/%2Fc")).url, "/base/a%20b/%2Fc", "an escaped prefix strips too; escapes go as sent");
      const answer = await seen("/api/v1/x");
      t.equal(answer.headers.host, new URL(upstream.url).host, "the upstream's own Host by default");
    });

    await t.test("rewrite applies after stripPrefix; the key's query parameter is removed; host: client", async (t) => {
      // fetch sets Host itself: a plain request names another.
      const answer = await new Promise<{ url: string; headers: Record<string, string> }>((resolve, reject) => {
        const path = `/users/ann%40b/posts?api_key=${key}&page=2`;
        httpRequest(`${base}${path}`, { headers: { host: "api.example.test" } }, (response) => {
          let body = "";
          response.on("data", (data: Buffer) => (body += data.toString()));
          response.on("end", () => resolve(JSON.parse(body)));
        })
          .on("error", reject)
          .end();
      });
      t.equal(answer.url, "/posts/by/ann%40b?page=2");
      t.equal(answer.headers.host, "api.example.test", "the client's Host");
      t.equal(answer.headers["x-forwarded-host"], "api.example.test");
      t.equal((await seen(`/users/ann/other?api_key=${key}`, {})).url, "/ann/other", "no match: the stripped path as it is");
    });

    await t.test("a rewrite that makes a dot segment is refused before the key is looked at", async (t) => {
      const before = upstream.seen.length;
      const refused = await fetch(`${base}/dots/.x`);
      t.equal(refused.status, 400);
      t.match(await refused.json(), { error: { detail: /rewrite makes the path '\/\.\.x'/ } });
      t.equal((await seen("/dots/x")).url, "/.x", "a dot inside a segment is forwarded");
      t.equal(upstream.seen.length, before + 1, "only the second reached the upstream");
    });

    await t.test("a route of the file without apiId is public: no key, its ip limit answers 429", async (t) => {
      const first = await fetch(`${base}/health/live`);
      t.equal(first.status, 200);
      t.equal(first.headers.get("x-ratelimit-limit"), "2");
      t.equal((await fetch(`${base}/health/live`)).status, 200);
      const refused = await fetch(`${base}/health/live`);
      t.equal(refused.status, 429);
      t.match(await refused.json(), { error: { status: 429 } });
      t.ok(refused.headers.get("retry-after"));
      const listed = await h.call("keygate.listRoutes", {});
      t.ok(
        listed.body.data.some((route: { name: string; source: string }) => route.name === "health" && route.source === "config"),
        "its workspace lists it",
      );
      const event = await waitFor("the public request's events", 5_000, () => {
        const health = events.filter((each) => each.route === "health");
        return health.length === 3 ? health : undefined;
      });
      t.same(
        event.map((each) => [each.workspaceId, each.apiId, each.keyId, each.outcome, each.responseStatus]),
        [
          [WORKSPACE, "", "", "", 200],
          [WORKSPACE, "", "", "", 200],
          [WORKSPACE, "", "", "", 429],
        ],
        "recorded in the route's workspace, without key or outcome",
      );
    });

    await t.test("a declared body over bodyLimit is 413 before the key is verified or anything is sent", async (t) => {
      const before = upstream.seen.length;
      const request = rawRequest("POST", "/uploads/echo", [
        ["Host", "x"],
        ["Content-Length", String(LIMIT + 1)],
      ]);
      const { responses } = await rawExchange(port, request, { responses: 1 });
      t.equal(responses[0]?.status, 413);
      t.match(JSON.parse(responses[0]?.body ?? "{}"), { error: { detail: /limit of 100000 bytes/ } });
      t.equal(responses[0]?.headers.connection, "close", "the body it did not read ends the connection");
      t.equal(upstream.seen.length, before, "the upstream saw nothing");
      const exact = await fetch(`${base}/uploads/echo`, { method: "POST", headers: uploader, body: Buffer.alloc(LIMIT, 1) });
      t.match(await exact.json(), { length: LIMIT }, "a body of exactly the limit passes");
      t.equal((await getKey(h, uploads.keyId)).credits.remaining, 9);
    });

    await t.test("a streamed body is cut off once it passes bodyLimit: 413, the upstream short of it, credits back", async (t) => {
      const received = upstream.progress.received;
      const chunk = Buffer.alloc(64 * 1024, 2);
      const client = httpRequest(`${base}/uploads/echo`, { method: "POST", headers: { ...uploader, "transfer-encoding": "chunked" } });
      client.on("error", () => {});
      const answer = new Promise<{ status: number; body: string }>((resolve) => {
        client.on("response", (response) => {
          let body = "";
          response.on("data", (data: Buffer) => (body += data.toString()));
          response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
        });
      });
      client.write(chunk);
      await waitFor("the first chunk upstream", 5_000, () => (upstream.progress.received - received >= chunk.length ? true : undefined));
      client.write(chunk);
      client.write(chunk);
      const { status, body } = await answer;
      t.equal(status, 413);
      t.match(JSON.parse(body), { error: { detail: /limit of 100000 bytes/ } });
      client.destroy();
      const got = upstream.progress.received - received;
      t.ok(got <= LIMIT, `the upstream got ${got} bytes, no more than the limit`);
      t.equal((await getKey(h, uploads.keyId)).credits.remaining, 9, "the request's credit came back");
    });
  });
}

t.test("public routes, path and host fields are validated, in the file and through the API", async (t) => {
  const upstream = "http://127.0.0.1:9";
  const load = (route: Record<string, unknown>) =>
    harness(t, { config: { routes: [{ name: "r", match: { prefix: "/r" }, upstream, ...route }] } }).then(
      () => "",
      (error: Error) => error.message,
    );
  t.match(await load({ workspaceId: WORKSPACE, key: { header: "x-key" }, credits: { cost: 1 } }), /routes\[0\]\.key: needs apiId/);
  t.match(await load({ workspaceId: WORKSPACE, credits: { cost: 1 } }), /routes\[0\]\.credits: needs apiId/);
  t.match(await load({}), /routes\[0\]\.workspaceId: is required on a public route/);
  t.match(
    await load({ workspaceId: WORKSPACE, namespaceLimits: [{ namespace: "n", identifier: "key", limit: 1, duration: 1_000 }] }),
    /routes\[0\]\.namespaceLimits\[0\]\.identifier: 'key' needs a key/,
  );
  t.match(await load({ apiId: API, workspaceId: WORKSPACE }), /routes\[0\]\.workspaceId: is the API's/);
  t.match(
    await load({ workspaceId: WORKSPACE, rewrite: { regex: "(", replacement: "/" } }),
    /routes\[0\]\.rewrite\.regex: is not a valid RE2/,
  );

  const h = await harness(t);
  const create = (fields: Record<string, unknown>) =>
    h.call("keygate.createRoute", { name: "edge", match: { prefix: "/edge" }, upstream, ...fields });
  assertInvalidAt(t, await create({ rewrite: { regex: "^/(a)$", replacement: "/$2" } }), "body.rewrite.replacement", /names group \$2/);
  assertInvalidAt(t, await create({ host: "server" }), "body.host");
  assertInvalidAt(t, await create({ bodyLimit: -1 }), "body.bodyLimit");
  const created = await create({ stripPrefix: true, host: "client", bodyLimit: 10, rewrite: { regex: "^/x", replacement: "/y" } });
  t.equal(created.status, 200, JSON.stringify(created.body));
  t.match(created.body.data, { stripPrefix: true, host: "client", bodyLimit: 10, rewrite: { regex: "^/x", replacement: "/y" } });
  const changed = await h.call("keygate.updateRoute", { route: "edge", host: null, rewrite: null, bodyLimit: 20 });
  t.equal(changed.status, 200, JSON.stringify(changed.body));
  t.equal(changed.body.data.host, undefined, "null removes a field");
  t.equal(changed.body.data.rewrite, undefined);
  t.equal(changed.body.data.bodyLimit, 20);
  t.equal(changed.body.data.stripPrefix, true, "a field not given stays");
  assertError(t, await h.call("keygate.updateRoute", { route: "edge", stripPrefix: "yes" }), "err:unkey:application:invalid_input");
});
