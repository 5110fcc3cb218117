import t from "tap";
import { hashKey } from "../../src/lib/hash.js";
import { assertError, assertInvalidAt } from "../helpers/assertions.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";

t.test("/v2 conventions", async (t) => {
  const h = await harness(t, { config: { server: { bodyLimit: 2048 } } });
  h.app.post("/v2/test.explode", async () => {
    throw new Error("connection to db-primary.internal:5432 refused, password=hunter2");
  });

  await t.test("GET /v2/liveness answers without authentication", async (t) => {
    const response = await h.app.inject({ method: "GET", url: "/v2/liveness" });
    t.equal(response.statusCode, 200);
    const body = response.json();
    t.same(body.data, { message: "we're cooking" });
    t.equal(response.headers["x-request-id"], body.meta.requestId);
  });

  await t.test("success bodies are the envelope, JSON, with a fresh req_ id that the client cannot choose", async (t) => {
    const first = await h.call("apis.createApi", { name: "envelope" }, { headers: { "x-request-id": "req_chosen_by_client" } });
    const second = await h.call("apis.createApi", { name: "envelope" });
    t.match(first.headers["content-type"], /^application\/json/);
    t.same(Object.keys(first.body), ["meta", "data"]);
    t.same(Object.keys(first.body.meta), ["requestId"]);
    t.match(first.body.meta.requestId, /^req_[1-9A-HJ-NP-Za-km-z]{10,}$/);
    t.not(first.body.meta.requestId, "req_chosen_by_client");
    t.not(first.body.meta.requestId, second.body.meta.requestId);
    t.equal(first.headers["x-request-id"], first.body.meta.requestId);
  });

  await t.test("an unknown path is a 404 in the error envelope", async (t) => {
    for (const url of ["/", "/v2/apis.doesNotExist", "/v3/apis.createApi", "/v2/"]) {
      const response = await h.app.inject({ method: "POST", url, headers: { authorization: `Bearer ${ROOT_KEY}` } });
      assertError(
        t,
        { status: response.statusCode, headers: response.headers, body: response.json() },
        "err:user:bad_request:route_not_found",
      );
    }
  });

  await t.test("a known path with the wrong method is a 405 with Allow", async (t) => {
    const get = await h.app.inject({ method: "GET", url: "/v2/apis.createApi" });
    assertError(
      t,
      { status: get.statusCode, headers: get.headers, body: get.json() },
      "err:user:bad_request:method_not_allowed",
      /use POST/,
    );
    t.equal(get.headers.allow, "POST");
    const post = await h.app.inject({ method: "DELETE", url: "/v2/liveness?x=1" });
    t.equal(post.statusCode, 405);
    t.match(post.headers.allow, /GET/);
  });

  await t.test("a body over server.bodyLimit is a 413", async (t) => {
    const result = await h.call("apis.createApi", { name: "x".repeat(4096) });
    assertError(t, result, "err:user:bad_request:request_body_too_large", /2048 bytes/);
  });

  await t.test("a body that is not JSON is a 400 request_body_unreadable; a non-JSON content type a 415", async (t) => {
    const send = (payload: string, contentType: string) =>
      h.app.inject({
        method: "POST",
        url: "/v2/apis.createApi",
        headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": contentType },
        payload,
      });
    for (const [payload, contentType, code] of [
      ["{not json", "application/json", "err:user:bad_request:request_body_unreadable"],
      ["", "application/json", "err:user:bad_request:request_body_unreadable"],
      ["name=orders", "application/x-www-form-urlencoded", "err:user:bad_request:unsupported_media_type"],
      ["orders", "text/plain", "err:user:bad_request:unsupported_media_type"],
    ] as const) {
      const response = await send(payload, contentType);
      assertError(t, { status: response.statusCode, headers: response.headers, body: response.json() }, code);
    }
  });

  await t.test("validation rejects wrong types without coercion and reports every problem", async (t) => {
    const result = await h.call("apis.getApi", { apiId: 12345678, extra: 1, another: 2 });
    assertInvalidAt(t, result, "body.apiId", "must be a string");
    assertInvalidAt(t, result, "body.extra", "is not a known field");
    assertInvalidAt(t, result, "body.another", "is not a known field");
    t.match(result.body.error.detail, /and 2 more problems/);
    assertInvalidAt(t, await h.call("apis.getApi", ["api_12345678"]), "body", "must be an object");
    assertInvalidAt(t, await h.call("apis.getApi", null), "body", "must be an object");
  });

  await t.test("an unexpected failure is a 500 that says nothing about its cause", async (t) => {
    const response = await h.app.inject({ method: "POST", url: "/v2/test.explode" });
    const result = { status: response.statusCode, headers: response.headers, body: response.json() };
    assertError(t, result, "err:unkey:application:unexpected_error", /request id/);
    t.notMatch(response.body, /hunter2|db-primary|5432|refused|stack/);
  });
});

t.test("root-key authentication", async (t) => {
  const h = await harness(t, {
    config: {
      rootKeys: [
        { key: ROOT_KEY, workspaceId: "ws_test", permissions: ["*"] },
        { key: "root_expired_in_config", workspaceId: "ws_test", permissions: ["*"], expires: 1_000 },
        { hash: hashKey("root_configured_by_hash_only"), workspaceId: "ws_test", permissions: ["api.*.create_api"] },
      ],
    },
  });

  await t.test("authentication happens before validation: no key and a bad body is a 401", async (t) => {
    assertError(t, await h.call("apis.createApi", { bad: true }, { rootKey: null }), "err:unkey:authentication:missing");
  });

  await t.test("the scheme is case-insensitive and surrounding whitespace is ignored", async (t) => {
    t.equal(
      (await h.call("apis.createApi", { name: "spaces" }, { rootKey: null, headers: { authorization: `  bearer   ${ROOT_KEY}  ` } }))
        .status,
      200,
    );
    assertError(
      t,
      await h.call("apis.createApi", { name: "x1x" }, { rootKey: null, headers: { authorization: `Bearer ${ROOT_KEY} extra` } }),
      "err:unkey:authentication:malformed",
    );
  });

  await t.test("a root key configured by its hash only is accepted", async (t) => {
    t.equal((await h.call("apis.createApi", { name: "hashed" }, { rootKey: "root_configured_by_hash_only" })).status, 200);
    assertError(
      t,
      await h.call("apis.getApi", { apiId: "api_12345678" }, { rootKey: "root_configured_by_hash_only" }),
      "err:unkey:authorization:insufficient_permissions",
    );
  });

  await t.test("an expired root key is a 401 that says so", async (t) => {
    assertError(
      t,
      await h.call("apis.createApi", { name: "late" }, { rootKey: "root_expired_in_config" }),
      "err:unkey:authentication:key_not_found",
      /expired/,
    );
  });

  await t.test("a stored root key works until it is revoked, then is a 401", async (t) => {
    const { id, key } = await h.app.services.rootKeys.create({ workspaceId: "ws_test", permissions: ["api.*.create_api"] });
    t.equal((await h.call("apis.createApi", { name: "before" }, { rootKey: key })).status, 200);
    await h.app.services.rootKeys.revoke(id);
    assertError(
      t,
      await h.call("apis.createApi", { name: "after" }, { rootKey: key }),
      "err:unkey:authentication:key_not_found",
      /revoked/,
    );
  });

  await t.test("a 403 detail names every missing alternative", async (t) => {
    const rootKey = await h.rootKey(["api.*.read_key"]);
    const result = await h.call("apis.getApi", { apiId: "api_12345678" }, { rootKey });
    assertError(t, result, "err:unkey:authorization:insufficient_permissions");
    t.equal(result.body.error.detail, "Missing one of these permissions: 'api.*.read_api' or 'api.api_12345678.read_api'.");
  });
});
