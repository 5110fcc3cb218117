import type { AddressInfo } from "node:net";
import t from "tap";
import { CAPTURED_BODY_BYTES, TRUNCATED_MARKER } from "../../src/gateway/body-capture.js";
import { analyticsDir } from "../helpers/analytics.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

const API = "api_gateway_events_stored";

t.test("the gateway's events become rows of gateway_requests_v1 that analytics.getGatewayRequests reads, bodies too", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      analytics: { engine: "embedded", path: analyticsDir(t) },
      apis: [{ id: API, name: "stored", workspaceId: WORKSPACE }],
      routes: [
        { name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: API },
        { name: "by-query", match: { prefix: "/query-key" }, upstream: upstream.url, apiId: API, key: { query: "api_key" } },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const { key, keyId } = await createKey(h, API);
  for (const [path, headers] of [
    ["/orders/1?page=2", { authorization: `Bearer ${key}` }],
    ["/orders/2", {}],
    [`/query-key/3?api_key=${key}`, {}],
  ] as const) {
    const response = await fetch(`${base}${path}`, { headers });
    await response.arrayBuffer();
  }

  const query =
    "SELECT app_id, api_id, path, query_string, response_status, key_id, outcome, instance_latency > 0 AS forwarded FROM gateway_requests_v1 ORDER BY path";
  const rows = await waitFor("the three requests are stored", 10_000, async (because) => {
    await h.app.analytics.flush();
    const result = await h.call("analytics.getGatewayRequests", { query });
    because(JSON.stringify(result.body));
    return result.status === 200 && result.body.data.length === 3 ? (result.body.data as Record<string, unknown>[]) : undefined;
  });
  t.same(rows, [
    {
      app_id: "orders",
      api_id: API,
      path: "/orders/1",
      query_string: "page=2",
      response_status: 200,
      key_id: keyId,
      outcome: "VALID",
      forwarded: 1,
    },
    { app_id: "orders", api_id: API, path: "/orders/2", query_string: "", response_status: 401, key_id: "", outcome: "", forwarded: 0 },
    {
      app_id: "by-query",
      api_id: API,
      path: "/query-key/3",
      query_string: "api_key=REDACTED",
      response_status: 200,
      key_id: keyId,
      outcome: "VALID",
      forwarded: 1,
    },
  ]);

  // A route whose logging policy asks for the bodies; the upstream's default answer is JSON naming the request.
  const created = await h.call("keygate.createRoute", {
    name: "logged",
    match: { prefix: "/logged" },
    upstream: upstream.url,
    policies: [
      { name: "auth", enabled: true, keyauth: { keyspaces: [API] } },
      { name: "bodies", enabled: true, logging: { requestBody: true, responseBody: true } },
    ],
  });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const json = JSON.stringify({ order: 42, note: "ünïcødé 🔑" });
  const big = "x".repeat(20 * 1024);
  const answers: string[] = [];
  for (const body of [json, big]) {
    const response = await fetch(`${base}/logged/orders`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body });
    t.equal(response.status, 200);
    answers.push(await response.text());
  }
  const logged = await waitFor("the logged requests are stored", 10_000, async (because) => {
    await h.app.analytics.flush();
    const result = await h.call("analytics.getGatewayRequests", {
      query:
        "SELECT request_body, response_body, length(request_body) AS request_bytes FROM gateway_requests_v1 WHERE app_id = 'logged' ORDER BY time, request_bytes",
    });
    because(JSON.stringify(result.body));
    return result.status === 200 && result.body.data.length === 2 ? (result.body.data as Record<string, unknown>[]) : undefined;
  });
  t.same(logged, [
    { request_body: json, response_body: answers[0], request_bytes: Buffer.byteLength(json) },
    {
      request_body: `${big.slice(0, CAPTURED_BODY_BYTES)}${TRUNCATED_MARKER}`,
      response_body: answers[1],
      request_bytes: CAPTURED_BODY_BYTES + Buffer.byteLength(TRUNCATED_MARKER),
    },
  ]);
  const plain = await h.call("analytics.getGatewayRequests", {
    query: "SELECT count() AS n FROM gateway_requests_v1 WHERE app_id != 'logged' AND (request_body != '' OR response_body != '')",
  });
  t.same(plain.body.data, [{ n: 0 }], "the routes without the policy: empty bodies");
});
