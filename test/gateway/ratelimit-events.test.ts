import type { AddressInfo } from "node:net";
import t from "tap";
import type { RatelimitEvent } from "../../src/domain/analytics/events.js";
import { recordingAnalytics } from "../helpers/analytics.js";
import { LONGEST_WINDOW_MS } from "../helpers/clock.js";
import { createKey } from "../helpers/fixtures.js";
import { type Harness, harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_gateway_rl_events";

async function namespaceId(h: Harness, name: string): Promise<string> {
  const namespace = await h.app.stores.ratelimitNamespaces.findNamespaceByName(WORKSPACE, name);
  if (!namespace) throw new Error(`no namespace ${name}`);
  return namespace.id;
}

for (const storage of STORAGE_KINDS) {
  t.test(`the gateway records each namespace limit it decides, on ${storage} stores`, async (t) => {
    const events: RatelimitEvent[] = [];
    const upstream = await startUpstream(t);
    const h = await harness(t, {
      storage,
      analytics: recordingAnalytics({ ratelimits: events }),
      config: {
        apis: [{ id: API, name: "rl-events", workspaceId: WORKSPACE }],
        routes: [
          {
            name: "namespaced",
            match: { prefix: "/ns" },
            upstream: upstream.url,
            apiId: API,
            namespaceLimits: [
              { namespace: "gw-per-key", identifier: "key", limit: 2, duration: LONGEST_WINDOW_MS },
              { namespace: "gw-per-tenant", identifier: "header:x-tenant", limit: 10, duration: LONGEST_WINDOW_MS, cost: 3 },
            ],
          },
          { name: "plain", match: { prefix: "/plain" }, upstream: upstream.url, apiId: API, ratelimits: [{ name: "requests" }] },
        ],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const send = async (path: string, key: string, tenant = "acme") => {
      const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}`, "x-tenant": tenant } });
      await response.arrayBuffer();
      return { status: response.status, requestId: response.headers.get("x-request-id") };
    };

    await t.test("one event per namespace limit per request, under the request's id, as the counters decided", async (t) => {
      const { key, keyId } = await createKey(h, API);
      const from = events.length;
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await send("/ns/x", key));
      t.same(
        answers.map((answer) => answer.status),
        [200, 200, 429],
        "the third request exceeds the per-key limit",
      );
      const recorded = events.slice(from);
      t.equal(recorded.length, 2 * answers.length, "two namespace limits, every request decided");
      const [perKey, perTenant] = [await namespaceId(h, "gw-per-key"), await namespaceId(h, "gw-per-tenant")];
      for (const [index, answer] of answers.entries()) {
        t.match(answer.requestId, /^req_/);
        const passed = answer.status === 200;
        t.match(recorded.slice(2 * index, 2 * index + 2), [
          { requestId: answer.requestId, workspaceId: WORKSPACE, namespaceId: perKey, identifier: keyId, passed, limit: 2, tokens: 1 },
          {
            requestId: answer.requestId,
            workspaceId: WORKSPACE,
            namespaceId: perTenant,
            identifier: "acme",
            passed: true,
            limit: 10,
            tokens: 3,
          },
        ]);
      }
      t.same(
        recorded.map((event) => [event.remaining, event.overrideId]),
        [
          [1, ""],
          [7, ""],
          [0, ""],
          [4, ""],
          [0, ""],
          [4, ""],
        ],
        "the denied request consumed nothing: the tenant's limit still has 4 after it",
      );
      for (const event of recorded) {
        t.ok(event.resetAt > event.time, "resetAt is after the decision");
        t.ok(event.latencyMs >= 0);
      }
    });

    await t.test("an override matched by the gateway's identifier is recorded", async (t) => {
      const { key, keyId } = await createKey(h, API);
      const set = await h.call("ratelimit.setOverride", { namespace: "gw-per-key", identifier: keyId, limit: 7, duration: 60_000 });
      t.equal(set.status, 200);
      const from = events.length;
      const answer = await send("/ns/y", key, "other-tenant");
      t.equal(answer.status, 200);
      t.match(events.slice(from), [
        { requestId: answer.requestId, identifier: keyId, overrideId: set.body.data.overrideId, limit: 7, remaining: 6 },
        { requestId: answer.requestId, identifier: "other-tenant", overrideId: "", limit: 10 },
      ]);
      t.equal(events.length, from + 2);
    });

    await t.test("nothing is recorded when verification stops before the counters, or for a key's own limits", async (t) => {
      const from = events.length;
      t.equal((await send("/ns/z", "not-a-key")).status, 401, "not found");
      const { key: disabled } = await createKey(h, API, { enabled: false });
      t.equal((await send("/ns/z", disabled)).status, 401, "disabled");
      const { key: limited } = await createKey(h, API, { ratelimits: [{ name: "requests", limit: 1, duration: 60_000 }] });
      t.same([(await send("/plain/a", limited)).status, (await send("/plain/b", limited)).status], [200, 429], "the key's own limit");
      const verified = await h.call("keys.verifyKey", { key: limited, ratelimits: [{ name: "requests" }] });
      t.equal(verified.body.data.code, "RATE_LIMITED");
      t.equal(events.length, from, "none of these is a rate limit event");
    });
  });
}
