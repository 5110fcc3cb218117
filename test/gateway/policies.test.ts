import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { assertError } from "../helpers/assertions.js";
import { createKey } from "../helpers/fixtures.js";
import { type CallResult, type Harness, harness, OTHER_ROOT_KEY, STORAGE_KINDS, type StorageKind } from "../helpers/harness.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";

// Routes managed through the API, their policies run by the gateway: each kind allowing and refusing, with real
// upstreams. Routes from the configuration file stay read-only.

const CONFIG_API = "api_policies_config";

interface Setup {
  h: Harness;
  upstream: Upstream;
  apiId: string;
  key: string;
  send(path: string, headers?: Record<string, string>): Promise<CallResult>;
}

async function setup(t: Test, storage: StorageKind): Promise<Setup> {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage,
    config: {
      apis: [{ id: CONFIG_API, name: "config-api", workspaceId: "ws_test" }],
      routes: [{ name: "from-file", match: { prefix: "/file" }, upstream: upstream.url, apiId: CONFIG_API }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const apiId = (await h.call("apis.createApi", { name: "orders" })).body.data.apiId as string;
  const { key } = await createKey(h, apiId, { meta: { plan: "gold" }, externalId: "customer_1" });
  return {
    h,
    upstream,
    apiId,
    key,
    async send(path, headers = {}) {
      const response = await fetch(`${base}${path}`, { headers });
      const text = await response.text();
      return {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        body: text.startsWith("{") ? JSON.parse(text) : text,
      };
    },
  };
}

const route = (upstream: string, policies: unknown[], extra: Record<string, unknown> = {}) => ({
  name: "orders",
  match: { prefix: "/orders" },
  upstream,
  policies,
  ...extra,
});

for (const storage of STORAGE_KINDS) {
  t.test(`policies on ${storage} stores`, async (t) => {
    const s = await setup(t, storage);
    const bearer = { authorization: `Bearer ${s.key}` };

    await t.test("a keyauth policy verifies the key and tells the upstream who the principal is", async (t) => {
      const created = await s.h.call(
        "keygate.createRoute",
        route(s.upstream.url, [{ name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } }], {
          forward: { principal: "x-principal" },
        }),
      );
      t.equal(created.status, 200, JSON.stringify(created.body));
      t.match(created.body.data, { id: /^rt_/, name: "orders", source: "api", policies: [{ id: /^pol_/, name: "auth", enabled: true }] });
      const refused = await s.send("/orders/1");
      t.equal(refused.status, 401);
      t.equal(refused.headers["www-authenticate"], 'Bearer realm="orders"');
      const allowed = await s.send("/orders/1", bearer);
      t.equal(allowed.status, 200);
      const principal = JSON.parse(allowed.body.headers["x-principal"]);
      t.match(principal, { subject: "customer_1", keyId: /^key_/, externalId: "customer_1", meta: { plan: "gold" } });
      t.equal(allowed.body.headers.authorization, undefined, "the key does not reach the upstream");
      const forged = await s.send("/orders/1", { ...bearer, "x-principal": "forged" });
      t.not(forged.body.headers["x-principal"], "forged", "a client's own principal header is dropped");
    });

    await t.test("a key of another API is refused; a firewall denies what it matches, before anything is charged", async (t) => {
      const otherApi = (await s.h.call("apis.createApi", { name: "other" })).body.data.apiId as string;
      const other = await createKey(s.h, otherApi);
      t.equal((await s.send("/orders/1", { authorization: `Bearer ${other.key}` })).status, 401);
      const { key, keyId } = await createKey(s.h, s.apiId, { credits: { remaining: 10 } });
      const set = await s.h.call("keygate.setRoutePolicies", {
        route: "orders",
        policies: [
          {
            name: "block admin",
            enabled: true,
            match: [{ path: { path: { prefix: "/orders/ADMIN", ignoreCase: true } } }],
            firewall: { action: "ACTION_DENY" },
          },
          { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId], credits: 2 } },
        ],
      });
      t.equal(set.status, 200, JSON.stringify(set.body));
      t.equal(set.body.data.policies[1].id, (await s.h.call("keygate.getRoute", { route: "orders" })).body.data.policies[1].id);
      const denied = await s.send("/orders/admin/x", { authorization: `Bearer ${key}` });
      assertError(t, denied, "err:keygate:gateway:request_denied", /block admin/);
      t.equal((await s.h.call("keys.getKey", { keyId })).body.data.credits.remaining, 10, "nothing charged");
      t.equal((await s.send("/orders/1", { authorization: `Bearer ${key}` })).status, 200);
      t.equal((await s.h.call("keys.getKey", { keyId })).body.data.credits.remaining, 8, "the keyauth policy's cost");

      const policyId = set.body.data.policies[0].id as string;
      const disabled = await s.h.call("keygate.updateRoutePolicy", { route: "orders", policyId, enabled: false });
      t.equal(disabled.status, 200);
      t.equal(disabled.body.data.policies[0].id, policyId, "the policy keeps its id and its place");
      t.equal((await s.send("/orders/admin/x", bearer)).status, 200, "a disabled policy is skipped");
    });

    await t.test("rate limit identifiers compound: one address, two tenants, two counts; a replace keeps the counts", async (t) => {
      const limited = {
        name: "per tenant",
        enabled: true,
        ratelimit: { limit: 2, windowMs: 60_000, identifiers: [{ remoteIp: {} }, { header: { name: "x-tenant" } }] },
      };
      const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } };
      t.equal((await s.h.call("keygate.setRoutePolicies", { route: "orders", policies: [auth, limited] })).status, 200);
      const as = (tenant: string) => s.send("/orders/1", { ...bearer, "x-tenant": tenant });
      t.same([(await as("a")).status, (await as("a")).status, (await as("a")).status], [200, 200, 429]);
      const refused = await as("a");
      t.equal(refused.headers["retry-after"] !== undefined, true, "a 429 says when to retry");
      t.equal((await as("b")).status, 200, "another tenant from the same address counts apart");
      const logging = { name: "log", enabled: true, logging: { requestHeaders: true } };
      t.equal((await s.h.call("keygate.setRoutePolicies", { route: "orders", policies: [logging, auth, limited] })).status, 200);
      t.equal((await as("a")).status, 429, "the policy kept its name, and with it its count");
    });

    await t.test("a route without keyauth takes anonymous requests under its rate limit", async (t) => {
      const created = await s.h.call("keygate.createRoute", {
        name: "public",
        match: { prefix: "/public" },
        upstream: s.upstream.url,
        policies: [
          { name: "only GET", enabled: true, match: [{ method: { methods: ["POST", "PUT"] } }], firewall: { action: "ACTION_DENY" } },
          { name: "per address", enabled: true, ratelimit: { limit: 1, windowMs: 60_000, identifiers: [{ remoteIp: {} }] } },
        ],
      });
      t.equal(created.status, 200, JSON.stringify(created.body));
      t.equal((await s.send("/public/health")).status, 200);
      t.equal((await s.send("/public/health")).status, 429);
      t.equal((await s.h.call("keygate.deleteRoute", { route: "public" })).status, 200);
      t.equal((await s.send("/public/health")).status, 404, "a deleted route takes nothing");
    });

    await t.test("firewall address lists and match expressions on headers and query parameters", async (t) => {
      const policies = [
        {
          name: "office only",
          enabled: true,
          match: [{ header: { name: "x-office", present: true } }],
          firewall: { action: "ACTION_DENY", ipAllow: ["10.0.0.0/8"] },
        },
        {
          name: "no debug",
          enabled: true,
          match: [{ queryParam: { name: "debug", value: { regex: "^(1|true)$" } } }],
          firewall: { action: "ACTION_DENY" },
        },
        { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } },
      ];
      t.equal((await s.h.call("keygate.setRoutePolicies", { route: "orders", policies })).status, 200);
      t.equal((await s.send("/orders/1", { ...bearer, "x-office": "1" })).status, 403, "127.0.0.1 is outside the allowed range");
      t.equal((await s.send("/orders/1?debug=true", { ...bearer, "x-tenant": "c" })).status, 403);
      t.equal((await s.send("/orders/1?debug=no", { ...bearer, "x-tenant": "c" })).status, 200);
    });
  });
}

t.test("writes are validated in full, each problem named by its field", async (t) => {
  const s = await setup(t, "memory");
  const invalid = async (body: unknown, location: string, message: RegExp) => {
    const answer = await s.h.call("keygate.createRoute", body);
    t.equal(answer.status, 400, JSON.stringify(answer.body));
    t.match(answer.body.error.errors, [{ location, message }], location);
  };
  const auth = { name: "auth", enabled: true, keyauth: { keyspaces: [s.apiId] } };
  await invalid(
    route(s.upstream.url, [auth, { name: "m", enabled: true, match: [{}], firewall: { action: "ACTION_DENY" } }]),
    "body.policies[1].match[0]",
    /must set exactly one of path, method, header or queryParam/,
  );
  await invalid(
    route(s.upstream.url, [{ name: "m", enabled: true, match: [{ path: { path: { regex: "(" } } }], firewall: { action: "ACTION_DENY" } }]),
    "body.policies[0].match[0].path.path.regex",
    /not a valid RE2/,
  );
  await invalid(
    route(s.upstream.url, [{ name: "two", enabled: true, firewall: { action: "ACTION_DENY" }, logging: {} }]),
    "body.policies[0]",
    /exactly one of keyauth/,
  );
  await invalid(
    route(s.upstream.url, [{ name: "k", enabled: true, keyauth: { keyspaces: ["api_nope"] } }]),
    "body.policies[0].keyauth.keyspaces[0]",
    /not an API of this workspace/,
  );
  await invalid(route(s.upstream.url, [auth, auth]), "body.policies[1].name", /also the name/);
  await invalid(
    route(s.upstream.url, [{ name: "r", enabled: true, ratelimit: { limit: 1, windowMs: 1_000 } }]),
    "body.policies[0].ratelimit",
    /exactly one of identifiers or identifier/,
  );
  await invalid({ ...route(s.upstream.url, []), match: { prefix: "/v2/x" } }, "body.match.prefix", /reserved/);
  t.same(
    (await s.h.call("keygate.listRoutes", {})).body.data.map((each: { name: string }) => each.name),
    ["from-file"],
    "nothing was stored",
  );

  const theirs = await s.h.call("keygate.createRoute", route(s.upstream.url, [auth]), { rootKey: OTHER_ROOT_KEY });
  t.match(
    theirs.body.error?.errors,
    [{ location: "body.policies[0].keyauth.keyspaces[0]" }],
    "another workspace's API is not one of this workspace's",
  );
});

t.test("routes of the configuration file are read-only; names and prefixes cannot clash", async (t) => {
  const s = await setup(t, "memory");
  const got = await s.h.call("keygate.getRoute", { route: "from-file" });
  t.match(got.body.data, {
    id: "config_route_from-file",
    source: "config",
    policies: [{ name: "keyauth", keyauth: { keyspaces: [CONFIG_API] } }],
  });
  assertError(
    t,
    await s.h.call("keygate.deleteRoute", { route: "from-file" }),
    "err:keygate:data:route_owned_by_config",
    /configuration file/,
  );
  assertError(
    t,
    await s.h.call("keygate.setRoutePolicies", { route: "from-file", policies: [] }),
    "err:keygate:data:route_owned_by_config",
  );
  assertError(
    t,
    await s.h.call("keygate.createRoute", { ...route(s.upstream.url, []), name: "from-file" }),
    "err:keygate:data:route_conflict",
    /from-file/,
  );
  assertError(
    t,
    await s.h.call("keygate.createRoute", { ...route(s.upstream.url, []), match: { prefix: "/file/" } }),
    "err:keygate:data:route_conflict",
    /already takes/,
  );
  assertError(t, await s.h.call("keygate.getRoute", { route: "nope" }), "err:keygate:data:route_not_found");
  assertError(
    t,
    await s.h.call("keygate.getRoute", { route: "from-file" }, { rootKey: OTHER_ROOT_KEY }),
    "err:keygate:data:route_not_found",
  );
  const narrow = await s.h.rootKey(["gateway.*.read_route"]);
  assertError(
    t,
    await s.h.call("keygate.createRoute", route(s.upstream.url, []), { rootKey: narrow }),
    "err:unkey:authorization:insufficient_permissions",
    /create_route/,
  );
});
