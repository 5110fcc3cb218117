import type { AddressInfo } from "node:net";
import t from "tap";
import { envelopeProblem, errorName } from "../helpers/envelope.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import { type RawResponse, rawExchange } from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_odd_urls";

/*
 * URLs a client may send that keygate has no reason to judge: a query is the upstream's to read, whatever it
 * holds, and a path with route-pattern characters is just a path. Neither may make keygate fail after it charged.
 */
t.test("odd queries reach the upstream as sent and odd paths are 404s, never a 500 after a charge", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "odd-urls", workspaceId: "ws_test" }],
      routes: [
        { name: "metered", match: { prefix: "/metered" }, upstream: `${upstream.url}/base`, apiId: API, credits: { cost: 1 } },
        { name: "by-query", match: { prefix: "/q" }, upstream: upstream.url, apiId: API, key: { query: "api_key" } },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const { key, keyId } = await createKey(h, API, { credits: { remaining: 100 } });
  const remaining = async () => (await h.call("keys.getKey", { keyId })).body.data.credits.remaining;
  const send = async (method: string, target: string, headers: string[] = [`Authorization: Bearer ${key}`]): Promise<RawResponse> => {
    const exchange = await rawExchange(port, `${method} ${target} HTTP/1.1\r\nHost: keygate\r\n${headers.join("\r\n")}\r\n\r\n`, {
      responses: 1,
    });
    return exchange.responses[0] as RawResponse;
  };

  await t.test("a query with a stray '%' or an encoded '/..' is forwarded untouched and charged once", async (t) => {
    for (const query of ["%", "a=%zz", "next=%2F..%2Fadmin", "path=/../etc&x=%E0%A4%A"]) {
      const before = await remaining();
      const answer = await send("GET", `/metered/items?${query}`);
      t.equal(answer.status, 200, `?${query} is answered by the upstream`);
      t.equal(upstream.seen.at(-1)?.url, `/base/metered/items?${query}`, "the upstream got the query as sent");
      t.equal(await remaining(), before - 1, "charged once");
    }
  });

  await t.test("a route taking the key from the query forwards the rest of an odd query", async (t) => {
    const answer = await send("GET", `/q/items?a=%zz&api_key=${key}`, []);
    t.equal(answer.status, 200);
    t.notMatch(upstream.seen.at(-1)?.url ?? "", key, "the key is not forwarded");
  });

  await t.test("a path with a route-pattern character is a 404 in the envelope, on the gateway and under /v2", async (t) => {
    const before = await remaining();
    const forwarded = upstream.seen.length;
    for (const [method, target, headers] of [
      ["PATCH", "*/42", [`Authorization: Bearer ${key}`]],
      ["GET", "/nowhere/a*b", [`Authorization: Bearer ${key}`]],
      ["GET", "/x:y/*", []],
      ["POST", "/v2/keys.*", [`Authorization: Bearer ${ROOT_KEY}`]],
      ["POST", "/v2/*/getKey", [`Authorization: Bearer ${ROOT_KEY}`]],
    ] as const) {
      const answer = await send(method, target, [...headers]);
      t.equal(answer.status, 404, `${method} ${target}`);
      t.equal(envelopeProblem(answer), undefined, "in the envelope, with x-request-id");
      t.equal(errorName(answer.body), "route_not_found");
    }
    t.equal(upstream.seen.length, forwarded, "nothing was forwarded");
    t.equal(await remaining(), before, "nothing was charged");
  });
});
