import t from "tap";
import { buildApp } from "../../src/app.js";
import { ensureBootstrapRootKey } from "../../src/bootstrap.js";
import { validateConfig } from "../../src/config/load.js";
import { configuredWorkspaces, recordReload, reloadChanges, reloadRoutes } from "../../src/config/reload.js";
import type { AuditEntry } from "../../src/domain/audit/audit-trail.js";
import { CurrentGatewaySnapshot, compileGatewaySnapshot } from "../../src/gateway/gateway-snapshot.js";
import { type Harness, harness, ROOT_KEY, WORKSPACE } from "../helpers/harness.js";

/** Dashboard sign-ins (and refused ones) and sign-outs, configuration reloads and the bootstrap root key. */

const entries = (h: Pick<Harness, "app">, workspaceId = WORKSPACE): Promise<AuditEntry[]> =>
  h.app.analytics.audit.list({ workspaceId, limit: 1000 });

t.test("dashboard sign-in, a refused sign-in and sign-out are recorded with the session's root key", async (t) => {
  const h = await harness(t);
  const weak = await h.rootKey(["api.*.read_api"]);
  const revoked = await h.call("keygate.createRootKey", { name: "old", permissions: ["api.*.read_api"] });
  await h.call("keygate.deleteRootKey", { rootKeyId: revoked.body.data.rootKeyId });
  const before = (await entries(h)).length;
  const headers = { "user-agent": "browser/1" };

  const signIn = await h.app.inject({ method: "POST", url: "/dashboard/api/session", headers, payload: { rootKey: weak } });
  t.equal(signIn.statusCode, 200);
  const [signedIn] = await entries(h);
  t.match(signedIn, { action: "dashboard.sign_in", actor: { type: "dashboard" }, userAgent: "browser/1", clientAddress: "127.0.0.1" });
  t.equal(signedIn?.requestId, signIn.headers["x-request-id"]);

  const refused = await h.app.inject({
    method: "POST",
    url: "/dashboard/api/session",
    headers,
    payload: { rootKey: revoked.body.data.key },
  });
  t.equal(refused.statusCode, 401);
  const [failed] = await entries(h);
  t.match(failed, {
    action: "dashboard.sign_in_failed",
    actor: { type: "dashboard", id: revoked.body.data.rootKeyId, name: "old" },
    resources: [{ type: "rootKey", id: revoked.body.data.rootKeyId }],
  });
  t.match(failed?.description, /revoked/);

  const unknown = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: "root_nobody_knows_this" } });
  t.equal(unknown.statusCode, 401);
  const [nowhere] = await h.app.analytics.audit.list({ workspaceId: "", limit: 10 });
  t.match(
    nowhere,
    { action: "dashboard.sign_in_failed", workspaceId: "", actor: { id: "" }, resources: [] },
    "an unknown key: no workspace",
  );
  t.notOk(JSON.stringify(nowhere).includes("root_nobody_knows_this"), "the presented key is not kept");

  const cookie = String(signIn.headers["set-cookie"]).split(";")[0] as string;
  const csrf = signIn.json().data.csrfToken as string;
  const created = await h.app.inject({
    method: "POST",
    url: "/dashboard/api/v2/keygate.listRootKeys",
    headers: { cookie, "x-keygate-csrf-token": csrf },
    payload: {},
  });
  t.equal(created.statusCode, 403, "a read the session may not do");
  const out = await h.app.inject({ method: "DELETE", url: "/dashboard/api/session", headers: { cookie, "x-keygate-csrf-token": csrf } });
  t.equal(out.statusCode, 200);
  const [signedOut] = await entries(h);
  t.match(signedOut, { action: "dashboard.sign_out", actor: { type: "dashboard", id: signedIn?.actor.id } });
  t.equal((await entries(h)).length, before + 3, "three entries in the workspace, the unknown key's elsewhere");
});

t.test("a write through a dashboard session is recorded with the dashboard as actor", async (t) => {
  const h = await harness(t);
  const signIn = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: ROOT_KEY } });
  const cookie = String(signIn.headers["set-cookie"]).split(";")[0] as string;
  const made = await h.app.inject({
    method: "POST",
    url: "/dashboard/api/v2/apis.createApi",
    headers: { cookie, "x-keygate-csrf-token": signIn.json().data.csrfToken },
    payload: { name: "from-dashboard" },
  });
  t.equal(made.statusCode, 200);
  const [entry] = await entries(h);
  t.match(entry, { action: "api.create", actor: { type: "dashboard", id: "config_root_key_0" } });
});

t.test("a configuration reload records what changed, by the system, in every workspace the file names", async (t) => {
  const route = (name: string, upstream = "http://127.0.0.1:1") => ({
    name,
    match: { prefix: `/${name}` },
    upstream,
    workspaceId: "ws_routes",
  });
  const file = (routes: object[], gateway: object = {}) =>
    validateConfig({ rootKeys: [{ key: ROOT_KEY, workspaceId: WORKSPACE, permissions: ["*"] }], routes, gateway });
  const running = file([route("one"), route("two")]);
  const next = file([route("two", "http://user:hunter2@127.0.0.1:2"), route("three")], { upstreamTimeoutMs: 1234 });
  const changes = reloadChanges(running, next);
  t.same(
    changes.map((change) => change.field),
    ["routes", "routes.one", "routes.two", "routes.three", "gateway"],
  );
  t.same(changes[0], { field: "routes", old: ["one", "two"], new: ["two", "three"] });
  t.notOk(JSON.stringify(changes).includes("hunter2"), "credentials in an upstream URL are masked");
  t.same(configuredWorkspaces(next), [WORKSPACE, "ws_routes"]);

  const h = await harness(t);
  const state = new CurrentGatewaySnapshot(compileGatewaySnapshot(running));
  const log = { info: () => {}, warn: () => {}, error: () => {} };
  t.ok(
    reloadRoutes(
      state,
      running,
      () => next,
      log,
      (applied, seen) => recordReload(h.app.services.audit, applied, seen),
    ),
  );
  for (const workspaceId of [WORKSPACE, "ws_routes"]) {
    const [entry] = await entries(h, workspaceId);
    t.match(entry, { action: "config.reload", actor: { type: "system", id: "keygate" }, requestId: "" }, workspaceId);
    t.equal(entry?.changes.length, 5);
  }
  recordReload(h.app.services.audit, next, []);
  t.equal((await entries(h)).length, 1, "a reload that changed nothing is not recorded");
});

t.test("the bootstrap root key's creation is recorded by the system, without the key", async (t) => {
  const app = await buildApp(validateConfig({ analytics: { engine: "off" } }), { logger: false });
  t.teardown(() => app.close());
  const created = await ensureBootstrapRootKey(app.services);
  const [entry] = await entries({ app }, created?.workspaceId);
  t.match(entry, { action: "rootKey.create", actor: { type: "system" }, resources: [{ type: "rootKey", id: created?.id }] });
  t.notOk(JSON.stringify(entry).includes(created?.key as string));
});

t.test("a write outside a request (the CLI's operator) is recorded by its root key, without request context", async (t) => {
  const h = await harness(t);
  await h.app.services.apis.createApi(h.app.services.rootKeys.operator(WORKSPACE), { name: "from-cli" });
  const [entry] = await entries(h);
  t.match(entry, {
    action: "api.create",
    actor: { type: "root_key", id: "operator", name: "" },
    requestId: "",
    clientAddress: "",
    userAgent: "",
  });
});

t.test("keys.updateKey names the rate limits it changed, without their ids", async (t) => {
  const h = await harness(t);
  const apiId = (await h.call("apis.createApi", { name: "limited" })).body.data.apiId;
  const keyId = (await h.call("keys.createKey", { apiId })).body.data.keyId;
  const limit = { name: "burst", limit: 5, duration: 1_000, autoApply: true };
  t.equal((await h.call("keys.updateKey", { keyId, ratelimits: [limit] })).status, 200);
  const [entry] = await entries(h);
  t.same(entry?.changes, [{ field: "ratelimits", old: null, new: [limit] }]);
});
