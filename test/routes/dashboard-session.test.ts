import type { AddressInfo } from "node:net";
import t from "tap";
import { validateConfig } from "../../src/config/load.js";
import { assertError } from "../helpers/assertions.js";
import { ManualClock } from "../helpers/clock.js";
import { type Harness, harness, ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

const IDLE_MS = 10 * 60_000;
const ABSOLUTE_MS = 60 * 60_000;

interface Session {
  cookie: string;
  csrf: string;
  setCookie: string;
}

/** Signs in with `rootKey` as the browser would and keeps what it would keep: the cookie and the CSRF token. */
async function signIn(h: Harness, rootKey: string, headers: Record<string, string> = {}): Promise<Session> {
  const response = await h.app.inject({ method: "POST", url: "/dashboard/api/session", headers, payload: { rootKey } });
  const setCookie = String(response.headers["set-cookie"]);
  return { cookie: setCookie.split(";")[0] as string, csrf: response.json().data.csrfToken, setCookie };
}

function callWithSession(h: Harness, session: Partial<Session>, procedure: string, body: unknown) {
  return h.app
    .inject({
      method: "POST",
      url: `/dashboard/api/v2/${procedure}`,
      headers: {
        ...(session.cookie ? { cookie: session.cookie } : {}),
        ...(session.csrf ? { "x-keygate-csrf-token": session.csrf } : {}),
      },
      payload: body as object,
    })
    .then((response) => ({ status: response.statusCode, headers: response.headers, body: response.json() }));
}

for (const storage of STORAGE_KINDS) {
  t.test(`dashboard sessions on ${storage} stores`, async (t) => {
    const clock = new ManualClock();
    const h = await harness(t, {
      storage,
      clock,
      config: { dashboard: { sessionIdleTimeoutMs: IDLE_MS, sessionAbsoluteTimeoutMs: ABSOLUTE_MS } },
    });

    await t.test("signing in sets an httpOnly SameSite=Strict cookie under the dashboard path and answers the CSRF token", async (t) => {
      const response = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: ROOT_KEY } });
      t.equal(response.statusCode, 200);
      const cookie = String(response.headers["set-cookie"]);
      t.match(cookie, /^keygate_session=[1-9A-HJ-NP-Za-km-z]{40,}; Path=\/dashboard; Max-Age=3600; HttpOnly; SameSite=Strict$/);
      t.notMatch(cookie, /Secure/, "not Secure over plain HTTP");
      t.match(response.json().data, { workspaceId: "ws_test", rootKeyId: "config_root_key_0", csrfToken: /^[1-9A-HJ-NP-Za-km-z]{40,}$/ });
      t.equal(response.json().data.expiresAt, clock.now() + ABSOLUTE_MS);
      t.equal(response.headers["cache-control"], "no-store");
      t.notMatch(response.body, ROOT_KEY, "the root key is not echoed");
      const sessionId = cookie.slice("keygate_session=".length).split(";")[0] as string;
      t.notMatch(response.body, sessionId, "the session id is only in the cookie");
    });

    await t.test("behind TLS (X-Forwarded-Proto: https) the cookie is Secure", async (t) => {
      const session = await signIn(h, ROOT_KEY, { "x-forwarded-proto": "https" });
      t.match(session.setCookie, /; Secure$/);
    });

    await t.test("a bad root key opens no session", async (t) => {
      const response = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: "root_wrong" } });
      assertError(
        t,
        { status: response.statusCode, headers: response.headers, body: response.json() },
        "err:unkey:authentication:key_not_found",
      );
      t.notOk(response.headers["set-cookie"]);
      const empty = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: {} });
      t.equal(empty.statusCode, 400);
      t.equal(empty.json().error.errors[0].location, "body.rootKey");
    });

    await t.test("the session calls /v2 procedures as its root key, with the same permission checks", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const created = await callWithSession(h, session, "apis.createApi", { name: "from-dashboard" });
      t.equal(created.status, 200);
      t.equal((await h.call("apis.getApi", { apiId: created.body.data.apiId })).status, 200, "the API exists for /v2 too");
      const narrow = await signIn(h, await h.rootKey(["api.*.read_api"]));
      assertError(
        t,
        await callWithSession(h, narrow, "apis.createApi", { name: "refused" }),
        "err:unkey:authorization:insufficient_permissions",
        /api\.\*\.create_api/,
      );
      const invalid = await callWithSession(h, session, "apis.createApi", { name: "x" });
      t.equal(invalid.status, 400);
      t.equal(invalid.body.error.errors[0].location, "body.name", "400s name the field, as on /v2");
    });

    await t.test("without the CSRF token, or with another session's, a session call is refused before it runs", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const other = await signIn(h, ROOT_KEY);
      assertError(
        t,
        await callWithSession(h, { cookie: session.cookie }, "apis.createApi", { name: "no-csrf" }),
        "err:keygate:authorization:csrf_token_invalid",
      );
      assertError(
        t,
        await callWithSession(h, { cookie: session.cookie, csrf: other.csrf }, "apis.createApi", { name: "wrong-csrf" }),
        "err:keygate:authorization:csrf_token_invalid",
      );
      assertError(
        t,
        await callWithSession(h, { csrf: session.csrf }, "apis.createApi", { name: "no-cookie" }),
        "err:keygate:authentication:session_invalid",
      );
      assertError(
        t,
        await callWithSession(h, { cookie: "keygate_session=forged", csrf: session.csrf }, "apis.createApi", { name: "forged" }),
        "err:keygate:authentication:session_invalid",
      );
    });

    await t.test("the session cookie is no credential on /v2 itself", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const response = await h.call(
        "apis.createApi",
        { name: "cookie-on-v2" },
        { rootKey: null, headers: { cookie: session.cookie, "x-keygate-csrf-token": session.csrf } },
      );
      assertError(t, response, "err:unkey:authentication:missing");
    });

    await t.test("GET session answers the session while it lasts; sign-out ends it and clears the cookie", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const read = await h.app.inject({ method: "GET", url: "/dashboard/api/session", headers: { cookie: session.cookie } });
      t.equal(read.statusCode, 200);
      t.equal(read.json().data.csrfToken, session.csrf);
      const withoutCsrf = await h.app.inject({ method: "DELETE", url: "/dashboard/api/session", headers: { cookie: session.cookie } });
      t.equal(withoutCsrf.statusCode, 403, "signing out needs the CSRF token too");
      const out = await h.app.inject({
        method: "DELETE",
        url: "/dashboard/api/session",
        headers: { cookie: session.cookie, "x-keygate-csrf-token": session.csrf },
      });
      t.equal(out.statusCode, 200);
      t.match(String(out.headers["set-cookie"]), /^keygate_session=; Path=\/dashboard; Max-Age=0; HttpOnly; SameSite=Strict/);
      const after = await h.app.inject({ method: "GET", url: "/dashboard/api/session", headers: { cookie: session.cookie } });
      assertError(
        t,
        { status: after.statusCode, headers: after.headers, body: after.json() },
        "err:keygate:authentication:session_invalid",
      );
      assertError(
        t,
        await callWithSession(h, session, "apis.createApi", { name: "after-signout" }),
        "err:keygate:authentication:session_invalid",
      );
    });

    await t.test("the idle timeout ends an unused session; use keeps it alive", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const read = () => h.app.inject({ method: "GET", url: "/dashboard/api/session", headers: { cookie: session.cookie } });
      clock.advance(IDLE_MS - 1_000);
      t.equal((await read()).statusCode, 200, "used just before the idle timeout");
      clock.advance(IDLE_MS - 1_000);
      t.equal((await read()).statusCode, 200, "the use started the idle timeout again");
      clock.advance(IDLE_MS);
      t.equal((await read()).statusCode, 401, "unused for the idle timeout: ended");
      clock.advance(-IDLE_MS);
      t.equal((await read()).statusCode, 401, "and it stays ended");
    });

    await t.test("the absolute timeout ends a session however it is used", async (t) => {
      const session = await signIn(h, ROOT_KEY);
      const read = () => h.app.inject({ method: "GET", url: "/dashboard/api/session", headers: { cookie: session.cookie } });
      for (let elapsed = 0; elapsed + IDLE_MS / 2 < ABSOLUTE_MS; elapsed += IDLE_MS / 2) {
        clock.advance(IDLE_MS / 2);
        t.equal((await read()).statusCode, 200);
      }
      clock.advance(IDLE_MS / 2);
      t.equal((await read()).statusCode, 401);
    });

    await t.test("revoking the session's root key ends the session at once", async (t) => {
      const created = await h.call("keygate.createRootKey", { permissions: ["api.*.create_api"] });
      const session = await signIn(h, created.body.data.key);
      t.equal((await callWithSession(h, session, "apis.createApi", { name: "before-revoke" })).status, 200);
      await h.call("keygate.deleteRootKey", { rootKeyId: created.body.data.rootKeyId });
      assertError(
        t,
        await callWithSession(h, session, "apis.createApi", { name: "after-revoke" }),
        "err:keygate:authentication:session_invalid",
        /revoked/,
      );
    });

    await t.test("every dashboard answer carries the security headers, errors included", async (t) => {
      const answers = [
        await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: ROOT_KEY } }),
        await h.app.inject({ method: "GET", url: "/dashboard/api/session" }),
        await h.app.inject({ method: "POST", url: "/dashboard/api/v2/apis.createApi", payload: {} }),
      ];
      for (const response of answers) {
        t.match(response.headers["content-security-policy"], /script-src 'self';/);
        t.notMatch(response.headers["content-security-policy"], /unsafe-inline/);
        t.match(response.headers["content-security-policy"], /frame-ancestors 'none'/);
        t.equal(response.headers["x-frame-options"], "DENY");
        t.equal(response.headers["referrer-policy"], "no-referrer");
        t.equal(response.headers["x-content-type-options"], "nosniff");
      }
    });
  });
}

t.test("dashboard.enabled false serves no session endpoint", async (t) => {
  const h = await harness(t, { config: { dashboard: { enabled: false } } });
  const response = await h.app.inject({ method: "POST", url: "/dashboard/api/session", payload: { rootKey: ROOT_KEY } });
  t.equal(response.statusCode, 404);
});

t.test("dashboard.path moves it", async (t) => {
  const h = await harness(t, { config: { dashboard: { path: "/admin/keys" } } });
  const response = await h.app.inject({ method: "POST", url: "/admin/keys/api/session", payload: { rootKey: ROOT_KEY } });
  t.equal(response.statusCode, 200);
  t.match(String(response.headers["set-cookie"]), /Path=\/admin\/keys;/);
});

t.test("the dashboard's configuration is validated with clear messages", async (t) => {
  const invalid = (dashboard: Record<string, unknown>) => {
    try {
      validateConfig({ dashboard }, "test");
      return "";
    } catch (error) {
      return String((error as Error).message);
    }
  };
  t.match(invalid({ path: "/dashboard/" }), /dashboard\.path.*without a trailing \//);
  t.match(invalid({ path: "dashboard" }), /dashboard\.path/);
  t.match(invalid({ path: "/v2" }), /dashboard\.path: '\/v2' is taken/);
  t.match(invalid({ path: "/v2/ui" }), /dashboard\.path: '\/v2\/ui' is taken/);
  t.match(invalid({ path: "/metrics" }), /is taken/);
  t.match(invalid({ sessionIdleTimeoutMs: 1_000 }), /dashboard\.sessionIdleTimeoutMs/);
  t.match(
    invalid({ sessionIdleTimeoutMs: 7_200_000, sessionAbsoluteTimeoutMs: 3_600_000 }),
    /must not be longer than dashboard\.sessionAbsoluteTimeoutMs/,
  );
  t.match(invalid({ enabled: "yes" }), /dashboard\.enabled/);
  t.equal(invalid({}), "");
});

t.test("the built pages are served under the path with the security headers, ahead of any gateway route", async (t) => {
  const h = await harness(t, {
    config: {
      routes: [{ name: "everything", match: { prefix: "/" }, upstream: "http://127.0.0.1:9", apiId: "api_dashboard" }],
      apis: [{ id: "api_dashboard", name: "dashboard", workspaceId: "ws_test" }],
    },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const redirect = await fetch(`${origin}/dashboard`, { redirect: "manual" });
  t.equal(redirect.status, 302);
  t.equal(redirect.headers.get("location"), "/dashboard/");
  await redirect.arrayBuffer();
  const page = await fetch(`${origin}/dashboard/`);
  t.equal(page.status, 200);
  t.match(page.headers.get("content-type"), /^text\/html/);
  t.equal(page.headers.get("cache-control"), "no-cache");
  t.match(page.headers.get("content-security-policy"), /script-src 'self';/);
  t.equal(page.headers.get("x-frame-options"), "DENY");
  const html = await page.text();
  t.notMatch(html, /<script>|<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
  const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
  t.ok(script, "the page loads its script from keygate");
  const asset = await fetch(`${origin}/dashboard/${script}`);
  t.equal(asset.status, 200);
  t.match(asset.headers.get("cache-control"), /immutable/);
  await asset.arrayBuffer();
  t.equal(asset.headers.get("referrer-policy"), "no-referrer");
  const elsewhere = await fetch(`${origin}/orders`);
  t.equal(elsewhere.status, 401, "paths outside the dashboard still go to the gateway route");
  await elsewhere.arrayBuffer();
});
