import { createHash } from "node:crypto";
import { type AddressInfo, connect } from "node:net";
import t, { type Test } from "tap";
import { stringify as toYaml } from "yaml";
import { DEFAULT_DOCS_URL, errorTypeUrl } from "../../src/errors/catalogue.js";
import { OPENAPI_BODY_LIMIT } from "../../src/gateway/openapi-policy.js";
import { assertInvalidAt } from "../helpers/assertions.js";
import { createKey, getKey } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";
import { readAnswer } from "../helpers/http-client.js";
import { startUpstream, type Upstream } from "../helpers/upstream.js";

const API = "api_openapi_policy";

/**
 * The document of the routes under `prefix`: its paths are request paths as the client sends them, the route's
 * prefix included (as the upstream gets them too).
 */
function itemsDocument(version: "3.0.3" | "3.1.0", prefix: string): Record<string, unknown> {
  const v31 = version === "3.1.0";
  return {
    openapi: version,
    info: { title: "items", version: "1" },
    paths: {
      [`${prefix}/items`]: {
        get: {
          parameters: [{ name: "limit", in: "query", required: true, schema: { type: "integer", minimum: 1 } }],
          responses: { "200": { description: "ok" } },
        },
      },
      [`${prefix}/items/{id}/echo`]: {
        post: {
          parameters: [
            { name: "id", in: "path", required: true, schema: { type: "integer" } },
            { name: "x-tenant", in: "header", required: true, schema: { type: "string" } },
          ],
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["items"],
                  properties: {
                    items: {
                      type: "array",
                      items: {
                        type: "object",
                        required: ["name"],
                        properties: {
                          name: { type: "string", minLength: 2 },
                          note: v31 ? { type: ["string", "null"] } : { type: "string", nullable: true },
                          padding: { type: "string" },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
          responses: { "200": { description: "ok" } },
        },
      },
    },
  };
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

interface Gateway {
  h: Harness;
  upstream: Upstream;
  port: number;
  send(
    path: string,
    options?: { method?: string; headers?: Record<string, string>; body?: string | ReadableStream<Uint8Array> },
  ): Promise<Answer>;
}

async function gateway(t: Test): Promise<Gateway> {
  const upstream = await startUpstream(t);
  const h = await harness(t, { config: { apis: [{ id: API, name: "openapi-policy", workspaceId: "ws_test" }] } });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const port = (h.app.server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;
  return {
    h,
    upstream,
    port,
    async send(path, options = {}) {
      const streamed = options.body instanceof ReadableStream;
      const response = await fetch(`${base}${path}`, {
        method: options.method ?? "GET",
        ...(options.headers ? { headers: options.headers } : {}),
        ...(options.body !== undefined ? { body: options.body } : {}),
        ...(streamed ? { duplex: "half" } : {}),
      } as RequestInit);
      return readAnswer(response);
    },
  };
}

/** A route in front of the upstream with a keyauth policy (1 credit a request) and an openapi policy. */
async function createRoute(gw: Gateway, name: string, prefix: string, openapi: Record<string, unknown> = {}): Promise<string> {
  const created = await gw.h.call("keygate.createRoute", {
    name,
    match: { prefix },
    upstream: gw.upstream.url,
    policies: [
      { name: "auth", enabled: true, keyauth: { keyspaces: [API], credits: 1 } },
      { name: "validate", enabled: true, openapi: {}, ...openapi },
    ],
  });
  if (created.status !== 200) throw new Error(`createRoute failed: ${JSON.stringify(created.body)}`);
  return created.body.data.id as string;
}

/** A 400 request_invalid in the envelope naming `location` (with `message`, when given). */
function assertRequestInvalid(t: Test, answer: Answer, location: string, message?: RegExp): void {
  t.equal(answer.status, 400, `400 (got ${JSON.stringify(answer.body)})`);
  t.equal(answer.body?.error?.type, errorTypeUrl("err:keygate:gateway:request_invalid", DEFAULT_DOCS_URL));
  t.equal(answer.headers.get("x-request-id"), answer.body?.meta?.requestId, "x-request-id names the request");
  const entries: { location: string; message: string }[] = answer.body?.error?.errors ?? [];
  const entry = entries.find((candidate) => candidate.location === location);
  t.ok(entry, `an errors[] entry at ${location} (got ${entries.map((e) => `${e.location}: ${e.message}`).join("; ")})`);
  if (entry && message) t.match(entry.message, message);
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

t.test("keygate.setRouteOpenApi refuses a broken document, naming body.document and why", async (t) => {
  const gw = await gateway(t);
  await createRoute(gw, "uploads", "/uploads");
  const upload = (document: string) => gw.h.call("keygate.setRouteOpenApi", { route: "uploads", document });
  assertInvalidAt(t, await upload("{ nope"), "body.document", /^is neither JSON nor YAML/);
  assertInvalidAt(t, await upload('{"openapi":"3.0.3","info":{"title":"t"},"paths":{}}'), "body.document", /required property 'version'/);
  assertInvalidAt(
    t,
    await upload(JSON.stringify({ ...itemsDocument("3.1.0", ""), components: { schemas: { A: { $ref: "/etc/passwd" } } } })),
    "body.document",
    /only internal refs/,
  );
  const accepted = await upload(toYaml(itemsDocument("3.0.3", "/uploads")));
  t.equal(accepted.status, 200);
  t.type(accepted.body.data.openApi.uploadedAt, "number");
  const read = await gw.h.call("keygate.getRouteOpenApi", { route: "uploads" });
  t.equal(read.body.data.document, toYaml(itemsDocument("3.0.3", "/uploads")), "the document is kept as uploaded");
  const again = await upload(JSON.stringify(itemsDocument("3.1.0", "/uploads")));
  t.ok(again.body.data.openApi.uploadedAt > accepted.body.data.openApi.uploadedAt, "each upload is later than the one it replaces");
});

for (const version of ["3.0.3", "3.1.0"] as const) {
  t.test(`an openapi policy validates requests against an OpenAPI ${version} document`, async (t) => {
    const gw = await gateway(t);
    const { h, send, upstream } = gw;
    const prefix = `/v${version.slice(0, 3).replace(".", "")}`;
    // The policy applies to the document's paths only: requests elsewhere under the prefix are not validated.
    await createRoute(gw, "items", prefix, { match: [{ path: { path: { prefix: `${prefix}/items` } } }] });
    // YAML for 3.0, JSON for 3.1.
    const document = itemsDocument(version, prefix);
    const text = version === "3.0.3" ? toYaml(document) : JSON.stringify(document);
    t.equal((await h.call("keygate.setRouteOpenApi", { route: "items", document: text })).status, 200);
    const { key, keyId } = await createKey(h, API, { credits: { remaining: 100 } });
    const auth = { authorization: `Bearer ${key}` };
    const credits = async () => (await getKey(h, keyId)).credits.remaining as number;
    const json = { ...auth, "content-type": "application/json", "x-tenant": "acme" };

    /** A refused request reaches no upstream and takes no credit. */
    const refused = async (t: Test, answer: Promise<Answer>, location: string, message?: RegExp) => {
      const [forwarded, before] = [upstream.seen.length, await credits()];
      assertRequestInvalid(t, await answer, location, message);
      t.equal(upstream.seen.length, forwarded, "nothing is forwarded");
      t.equal(await credits(), before, "no credit is spent");
    };

    await t.test("a valid request is forwarded with its body intact, and spends its credit", async (t) => {
      const body = JSON.stringify({
        items: [
          { name: "widget", note: null },
          { name: "gadget", note: "ünïcødé" },
        ],
      });
      const before = await credits();
      const answer = await send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body });
      t.equal(answer.status, 200);
      t.same(answer.body, { length: Buffer.byteLength(body), sha256: sha256(body) }, "the upstream got the very bytes sent");
      t.equal(upstream.seen.at(-1)?.headers["content-length"], String(Buffer.byteLength(body)));
      t.equal(await credits(), before - 1);
      t.equal((await send(`${prefix}/items?limit=5`, { headers: auth })).status, 200);
    });

    await t.test("a body sent in chunks is read whole, validated and forwarded whole", async (t) => {
      const body = JSON.stringify({ items: [{ name: "chunked", padding: "x".repeat(100_000) }] });
      const bytes = new TextEncoder().encode(body);
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let at = 0; at < bytes.length; at += 16_384) controller.enqueue(bytes.subarray(at, at + 16_384));
          controller.close();
        },
      });
      const answer = await send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body: stream });
      t.equal(answer.status, 200);
      t.same(answer.body, { length: bytes.length, sha256: sha256(body) });
    });

    await t.test("a path parameter of the wrong type is refused", async (t) => {
      await refused(t, send(`${prefix}/items/seven/echo`, { method: "POST", headers: json, body: '{"items":[]}' }), "path.id", /integer/);
    });

    await t.test("a missing required query parameter is refused", async (t) => {
      await refused(t, send(`${prefix}/items`, { headers: auth }), "query.limit", /is required/);
      await refused(t, send(`${prefix}/items?limit=0`, { headers: auth }), "query.limit", /must be >= 1/);
    });

    await t.test("a missing required header is refused", async (t) => {
      const { "x-tenant": _tenant, ...withoutTenant } = json;
      await refused(t, send(`${prefix}/items/7/echo`, { method: "POST", headers: withoutTenant, body: '{"items":[]}' }), "header.x-tenant");
    });

    await t.test("a JSON body that does not match its schema, or is not JSON, is refused", async (t) => {
      const invalid = JSON.stringify({ items: [{ name: "ok" }, { name: "x" }] });
      await refused(
        t,
        send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body: invalid }),
        "body.items[1].name",
        /2 characters/,
      );
      await refused(t, send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body: '{"items": [' }), "body", /not valid JSON/);
      await refused(t, send(`${prefix}/items/7/echo`, { method: "POST", headers: json }), "body", /is required/);
      await refused(
        t,
        send(`${prefix}/items/7/echo`, { method: "POST", headers: { ...json, "content-type": "text/plain" }, body: "items" }),
        "header.content-type",
        /application\/json/,
      );
    });

    await t.test("a method or path the document does not describe is refused", async (t) => {
      await refused(t, send(`${prefix}/items/7/echo`, { headers: auth }), "method", /POST/);
      await refused(t, send(`${prefix}/items/7/other`, { headers: auth }), "path");
    });

    await t.test("a body larger than the policy reads is refused with 413, and not forwarded", async (t) => {
      const [forwarded, before] = [upstream.seen.length, await credits()];
      const large = JSON.stringify({ items: [{ name: "big", padding: "x".repeat(OPENAPI_BODY_LIMIT) }] });
      const answer = await send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body: large });
      t.equal(answer.status, 413);
      t.equal(answer.body.error.type, errorTypeUrl("err:user:bad_request:request_body_too_large", DEFAULT_DOCS_URL));
      t.equal(upstream.seen.length, forwarded);
      t.equal(await credits(), before);
    });

    await t.test("a body sent in chunks is refused with 413 once it outgrows what the policy reads", async (t) => {
      const [forwarded, before] = [upstream.seen.length, await credits()];
      const chunk = new TextEncoder().encode(`{"items":[{"name":"big","padding":"${"x".repeat(64 * 1024)}`);
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          // Comes to twice the limit, unless the answer came first.
          if (sent > 2 * OPENAPI_BODY_LIMIT) return controller.close();
          sent += chunk.length;
          controller.enqueue(chunk);
        },
      });
      const answer = await send(`${prefix}/items/7/echo`, { method: "POST", headers: json, body: stream }).catch((error: Error) => error);
      // The answer may reach the client only as its upload is cut off: either way nothing went upstream.
      if (!(answer instanceof Error)) {
        t.equal(answer.status, 413);
        t.equal(answer.headers.get("connection"), "close", "the rest of the body is not read");
      }
      t.equal(upstream.seen.length, forwarded);
      t.equal(await credits(), before);
    });

    await t.test("a client that goes away while its body is read is not forwarded, nor charged", async (t) => {
      const [forwarded, before] = [upstream.seen.length, await credits()];
      const socket = connect({ port: gw.port, host: "127.0.0.1" });
      await new Promise((resolve) => socket.once("connect", resolve));
      const head = [
        `POST ${prefix}/items/7/echo HTTP/1.1`,
        "host: keygate",
        `authorization: Bearer ${key}`,
        "content-type: application/json",
        "x-tenant: acme",
        "content-length: 1000",
      ];
      socket.write(`${head.join("\r\n")}\r\n\r\n{"items":[`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 50));
      t.equal(upstream.seen.length, forwarded);
      t.equal(await credits(), before);
      t.equal((await send(`${prefix}/items?limit=5`, { headers: auth })).status, 200, "and the gateway serves on");
    });

    await t.test("a request the policy's match excludes is not validated, nor its body read", async (t) => {
      const answer = await send(`${prefix}/elsewhere?anything=goes`, { headers: auth });
      t.equal(answer.status, 200, "a path the document does not have, outside the policy's match");
      const large = "y".repeat(OPENAPI_BODY_LIMIT * 2);
      const echoed = await send(`${prefix}/elsewhere/echo`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: large,
      });
      t.same(echoed.body, { length: large.length, sha256: sha256(large) }, "streamed upstream, larger than the policy would read");
    });

    await t.test("without a key, a valid request is still refused by keyauth; an invalid one by the openapi policy first", async (t) => {
      t.equal((await send(`${prefix}/items?limit=5`)).status, 401);
      t.equal((await send(`${prefix}/items`)).status, 400, "decided before the key: no store is asked");
    });
  });
}

t.test("a route whose openapi policy has no document lets requests through", async (t) => {
  const gw = await gateway(t);
  await createRoute(gw, "undocumented", "/undocumented");
  const { key } = await createKey(gw.h, API);
  const answer = await gw.send("/undocumented/anything?at=all", { method: "POST", headers: { authorization: `Bearer ${key}` }, body: "{" });
  t.equal(answer.status, 200);
  t.equal(answer.body.url, "/undocumented/anything?at=all");

  t.test("nor does a document uploaded and then removed", async (t) => {
    await createRoute(gw, "removed", "/removed");
    const document = JSON.stringify(itemsDocument("3.1.0", "/removed"));
    t.equal((await gw.h.call("keygate.setRouteOpenApi", { route: "removed", document })).status, 200);
    t.equal((await gw.send("/removed/anything", { headers: { authorization: `Bearer ${key}` } })).status, 400);
    t.equal((await gw.h.call("keygate.setRouteOpenApi", { route: "removed", document: null })).status, 200);
    t.equal((await gw.send("/removed/anything", { headers: { authorization: `Bearer ${key}` } })).status, 200);
  });
});
