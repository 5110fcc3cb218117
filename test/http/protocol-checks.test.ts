import type { AddressInfo } from "node:net";
import t from "tap";
import { envelopeProblem, errorName } from "../helpers/envelope.js";
import { createKey } from "../helpers/fixtures.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import { type RawResponse, rawExchange } from "../helpers/raw-http.js";
import { startUpstream } from "../helpers/upstream.js";

const API = "api_protocol_checks";

/*
 * Requests Node's HTTP server used to refuse by itself, with a bare status line and no x-request-id: an
 * HTTP/1.1 request without Host, and an Expect other than 100-continue. keygate refuses them in the envelope, on
 * the management API and the gateway alike, before anything is verified or charged.
 */
t.test("requests Node would refuse bare are refused in the envelope, and Expect: 100-continue is served", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "protocol-checks", workspaceId: "ws_test" }],
      routes: [{ name: "metered", match: { prefix: "/metered" }, upstream: upstream.url, apiId: API, credits: { cost: 1 } }],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const { key, keyId } = await createKey(h, API, { credits: { remaining: 100 } });
  const remaining = async () => (await h.call("keys.getKey", { keyId })).body.data.credits.remaining;
  const send = async (head: string, body = ""): Promise<RawResponse> => {
    const exchange = await rawExchange(port, `${head}\r\n\r\n${body}`, { responses: 1 });
    t.equal(exchange.responses.length, 1, `one answer to ${head.split("\r\n")[0]}`);
    return exchange.responses[0] as RawResponse;
  };
  const v2 = (headers: string[]) =>
    [
      "POST /v2/apis.createApi HTTP/1.1",
      `Authorization: Bearer ${ROOT_KEY}`,
      "Content-Type: application/json",
      "Content-Length: 16",
      ...headers,
    ].join("\r\n");
  const gateway = (headers: string[]) => ["GET /metered/x HTTP/1.1", `Authorization: Bearer ${key}`, ...headers].join("\r\n");

  await t.test("an HTTP/1.1 request without Host is a 400 missing_required_header", async (t) => {
    for (const head of [v2([]), gateway([])]) {
      const answer = await send(head, head.startsWith("POST") ? '{"name":"host"}\n' : "");
      t.equal(answer.status, 400);
      t.equal(envelopeProblem(answer), undefined, "in the envelope, with x-request-id");
      t.equal(errorName(answer.body), "missing_required_header");
      t.match(answer.body.toString(), /Host header/);
    }
    t.equal(upstream.seen.length, 0, "nothing was forwarded");
    t.equal(await remaining(), 100, "nothing was charged");
  });

  await t.test("an HTTP/1.0 request needs no Host: it goes on to the route's checks", async (t) => {
    const answer = await send("GET /metered/old HTTP/1.0");
    t.equal(answer.status, 401);
    t.equal(errorName(answer.body), "missing_key");
  });

  await t.test("an Expect other than 100-continue is a 417 expectation_failed", async (t) => {
    const before = upstream.seen.length;
    const charged = await remaining();
    for (const head of [v2(["Host: keygate", "Expect: teapot"]), gateway(["Host: keygate", "Expect: 200-ok"])]) {
      const answer = await send(head, head.startsWith("POST") ? '{"name":"tea"}\n\n' : "");
      t.equal(answer.status, 417);
      t.equal(envelopeProblem(answer), undefined, "in the envelope, with x-request-id");
      t.equal(errorName(answer.body), "expectation_failed");
    }
    t.equal(upstream.seen.length, before, "nothing was forwarded");
    t.equal(await remaining(), charged, "nothing was charged");
  });

  await t.test("Expect: 100-continue gets its 100 and is served; the gateway does not forward the header", async (t) => {
    const created = await send(v2(["Host: keygate", "Expect: 100-continue"]), '{"name":"cont"}\n');
    t.equal(created.status, 200, "the /v2 procedure ran");
    const charged = await remaining();
    const forwarded = await send(
      `POST /metered/upload HTTP/1.1\r\nHost: keygate\r\nAuthorization: Bearer ${key}\r\nExpect: 100-continue\r\nContent-Length: 5`,
      "hello",
    );
    t.equal(forwarded.status, 200, "the upstream answered");
    t.equal(upstream.seen.at(-1)?.url, "/metered/upload");
    t.equal(upstream.seen.at(-1)?.headers.expect, undefined, "keygate met the expectation itself");
    t.equal(await remaining(), charged - 1, "charged once");
  });
});
