import type { AddressInfo } from "node:net";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, STORAGE_KINDS, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";

/**
 * Real traffic, counted: every ratelimit.limit and multiLimit decision and every namespace limit the gateway
 * applies is one row of ratelimits_v1, and every request a gateway route takes is one row of gateway_requests_v1,
 * exactly; refusals before a decision leave no rate limit row.
 */

// chDB binds one directory per process: both storage kinds write to it, each under names of its own.
const dir = analyticsDir(t);

for (const storage of STORAGE_KINDS) {
  t.test(`events of real traffic on ${storage} stores, counted`, async (t) => {
    const upstream = await startUpstream(t);
    const apiId = `api_counted_${storage}`;
    const route = `counted_${storage}`;
    const gatewayNamespace = `gateway_${storage}`;
    const h = await harness(t, {
      storage,
      config: {
        analytics: { engine: "embedded", path: dir },
        apis: [{ id: apiId, name: "counted", workspaceId: WORKSPACE }],
        routes: [
          {
            name: route,
            match: { prefix: "/counted" },
            upstream: upstream.url,
            apiId,
            key: { query: "api_key" },
            namespaceLimits: [{ namespace: gatewayNamespace, identifier: "key", limit: 3, duration: 60_000 }],
          },
        ],
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const { key } = await createKey(h, apiId);

    const limit = (namespace: string, identifier: string) =>
      h.call("ratelimit.limit", { namespace: `${namespace}_${storage}`, identifier, limit: 5, duration: 60_000 });
    const limited = [];
    for (let n = 0; n < 7; n++) limited.push(await limit("calls", "user_1"));
    t.same(
      limited.map((answer) => answer.body.data.success),
      [true, true, true, true, true, false, false],
    );
    for (let n = 0; n < 2; n++) {
      const batch = await h.call(
        "ratelimit.multiLimit",
        ["a", "b", "c"].map((name) => ({ namespace: `multi_${storage}`, identifier: name, limit: 5, duration: 60_000 })),
      );
      t.equal(batch.status, 200);
    }
    const readOnly = await h.rootKey(["ratelimit.*.read_namespace"]);
    const refused = await h.call(
      "ratelimit.limit",
      { namespace: `calls_${storage}`, identifier: "user_1", limit: 5, duration: 60_000 },
      { rootKey: readOnly },
    );
    t.equal(refused.status, 403, "refused before deciding");

    const statuses: number[] = [];
    for (let n = 0; n < 5; n++) statuses.push((await fetch(`${base}/counted/orders?api_key=${key}&page=${n}`)).status);
    for (let n = 0; n < 2; n++) statuses.push((await fetch(`${base}/counted/orders?api_key=unknown_${n}`)).status);
    statuses.push((await fetch(`${base}/counted/orders`)).status);
    t.same(statuses, [200, 200, 200, 429, 429, 401, 401, 401]);
    await fetch(`${base}/v2/liveness`);
    await fetch(`${base}/elsewhere`);

    await h.app.analytics.flush();
    const namespaces = new Map(
      (await h.app.services.ratelimit.listNamespaces(WORKSPACE)).map((namespace) => [namespace.name, namespace.id]),
    );
    const decisions = await h.call("analytics.getRatelimits", {
      query: `SELECT namespace_id, count() AS total, countIf(passed) AS passed FROM ratelimits_v1 WHERE namespace_id IN ('${[
        `calls_${storage}`,
        `multi_${storage}`,
        gatewayNamespace,
      ]
        .map((name) => namespaces.get(name))
        .join("', '")}') GROUP BY namespace_id`,
    });
    t.equal(decisions.status, 200, JSON.stringify(decisions.body.error ?? ""));
    const byName = (name: string) => decisions.body.data.find((row: { namespace_id: string }) => row.namespace_id === namespaces.get(name));
    t.same(
      byName(`calls_${storage}`),
      { namespace_id: namespaces.get(`calls_${storage}`), total: 7, passed: 5 },
      "7 limit calls, no row for the refused one",
    );
    t.same(byName(`multi_${storage}`), { namespace_id: namespaces.get(`multi_${storage}`), total: 6, passed: 6 }, "two batches of three");
    t.same(
      byName(gatewayNamespace),
      { namespace_id: namespaces.get(gatewayNamespace), total: 5, passed: 3 },
      "one per request whose key was found; none for unknown or missing keys",
    );

    const requests = await h.call("analytics.getGatewayRequests", {
      query: `SELECT response_status, count() AS n FROM gateway_requests_v1 WHERE app_id = '${route}' GROUP BY response_status ORDER BY response_status`,
    });
    t.equal(requests.status, 200, JSON.stringify(requests.body.error ?? ""));
    t.same(
      requests.body.data,
      [
        { response_status: 200, n: 3 },
        { response_status: 401, n: 3 },
        { response_status: 429, n: 2 },
      ],
      "every gateway request once; /v2 and unrouted paths are not gateway requests",
    );
    const leaked = await h.call("analytics.getGatewayRequests", {
      query: `SELECT count() AS n FROM gateway_requests_v1 WHERE app_id = '${route}' AND (query_string LIKE '%${key}%' OR path LIKE '%${key}%')`,
    });
    t.same(leaked.body.data, [{ n: 0 }], "the key is in no row");
  });
}
