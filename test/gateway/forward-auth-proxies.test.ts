import type { AddressInfo } from "node:net";
import t from "tap";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { harness } from "../helpers/harness.js";
import { type RunningProxy, startCaddy, startNginx } from "../helpers/proxies.js";
import { startUpstream } from "../helpers/upstream.js";

// Real nginx and real Caddy, each running its recipe of docs/forward-auth.md, in front of a test API, asking keygate
// (on Redis stores) at its forward-auth door about every request.

const API = "api_forward_auth_proxies";
const LIMIT = 3;

const proxies = {
  nginx: startNginx,
  caddy: startCaddy,
} as const;

for (const [name, start] of Object.entries(proxies)) {
  t.test(`${name} in front of the API asks keygate, and forwards only what keygate allows`, async (t) => {
    const api = await startUpstream(t);
    const h = await harness(t, {
      storage: "redis",
      config: {
        apis: [{ id: API, name: "forward-auth-proxies", workspaceId: "ws_test" }],
        // Decision-only: the proxy forwards, keygate decides.
        routes: [
          {
            name: "orders",
            match: { prefix: "/orders" },
            apiId: API,
            permissions: "orders.read",
            forward: { keyId: "x-keygate-key-id", identity: "x-keygate-identity" },
            namespaceLimits: [{ namespace: `orders-${name}`, identifier: "key", limit: LIMIT, duration: LONGEST_WINDOW_MS }],
          },
        ],
        gateway: { trustProxy: "loopback" },
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const keygate = `127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const proxy: RunningProxy = await start(t, { keygate, api: new URL(api.url).host });
    const send = async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${proxy.url}${path}`, { headers });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text };
    };
    const forwarded = () => api.seen.length;
    // What the proxy logged, should a step fail.
    t.teardown(() => {
      if (!t.passing()) console.error(`${name}'s log:\n${proxy.log()}`);
    });

    await t.test("no key: 401 with WWW-Authenticate, not forwarded", async (t) => {
      const response = await send("/orders/1");
      t.equal(response.status, 401);
      t.equal(response.headers.get("www-authenticate"), 'Bearer realm="orders"');
      t.equal(forwarded(), 0);
    });

    await t.test("an unknown key: 401, not forwarded", async (t) => {
      const response = await send("/orders/1", { authorization: "Bearer not_a_key" });
      t.equal(response.status, 401);
      t.equal(forwarded(), 0);
    });

    await t.test("a key without the permission: 403, not forwarded", async (t) => {
      const { key } = await createKey(h, API);
      const response = await send("/orders/1", { authorization: `Bearer ${key}` });
      t.equal(response.status, 403);
      t.equal(forwarded(), 0);
    });

    await t.test("a valid key: forwarded with its identity headers, without the key", async (t) => {
      const { key, keyId } = await createKey(h, API, { externalId: `acme-${name}`, permissions: ["orders.read"] });
      const response = await send("/orders/7?page=2", { authorization: `Bearer ${key}`, "x-keygate-key-id": "key_forged" });
      t.equal(response.status, 200);
      t.equal(forwarded(), 1);
      const seen = api.seen.at(-1);
      t.equal(seen?.url, "/orders/7?page=2");
      t.equal(seen?.headers["x-keygate-key-id"], keyId, "the key's id, the forged one replaced");
      t.match(seen?.headers["x-keygate-identity"], /^id_/, "its identity");
      t.equal(seen?.headers.authorization, undefined, "the key stays with the proxy");
      // Caddy's forward_auth copies headers into the request only.
      if (name === "nginx") t.match(response.headers.get("ratelimit"), /r=2/, "the client sees the RateLimit header keygate answered");
    });

    await t.test("a key without an identity: a forged identity header never reaches the API", async (t) => {
      const { key } = await createKey(h, API, { permissions: ["orders.read"] });
      const response = await send("/orders/8", { authorization: `Bearer ${key}`, "x-keygate-identity": "id_forged" });
      t.equal(response.status, 200);
      t.notOk(api.seen.at(-1)?.headers["x-keygate-identity"], "no identity, and not the forged one");
    });

    await t.test(`over the limit (${LIMIT}): 429 to the client with Retry-After, never forwarded`, async (t) => {
      const { key } = await createKey(h, API, { permissions: ["orders.read"] });
      for (let i = 0; i < LIMIT; i++) t.equal((await send("/orders/9", { authorization: `Bearer ${key}` })).status, 200);
      const before = forwarded();
      const refused = await send("/orders/9", { authorization: `Bearer ${key}` });
      t.equal(refused.status, 429);
      t.ok(Number(refused.headers.get("retry-after")) >= 1, "Retry-After");
      t.match(refused.headers.get("ratelimit"), /r=0/);
      if (name === "caddy") t.match(JSON.parse(refused.text).error.type, /rate_limited$/, "Caddy passes keygate's envelope on");
      t.equal(forwarded(), before, "not forwarded");
    });

    await t.test("a path no route takes: refused with 404, never let through", async (t) => {
      const { key } = await createKey(h, API, { permissions: ["*"] });
      const before = forwarded();
      const response = await send("/admin/users", { authorization: `Bearer ${key}` });
      t.equal(response.status, 404);
      t.equal(forwarded(), before);
    });
  });
}
