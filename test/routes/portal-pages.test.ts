import t from "tap";
import { assertError } from "../helpers/assertions.js";
import { createApi } from "../helpers/fixtures.js";
import { type Harness, harness } from "../helpers/harness.js";

// The portal's page endpoints: redeeming a code into the cookie, the session read back, CSRF on every procedure,
// sign-out; a session serves its own portal's pages only.

async function mint(h: Harness, portal: string, scopes = ["keys:read"]): Promise<string> {
  const minted = await h.call("portal.createSession", { portal, externalId: "pat", scopes, returnUrl: "https://app.test/back" });
  return new URL(minted.body.data.url).searchParams.get("code") as string;
}

t.test("the portal's page endpoints", async (t) => {
  const h = await harness(t);
  const apiId = await createApi(h, "pages");
  await h.call("portal.createPortal", {
    slug: "pages",
    displayName: "Pages",
    mapping: { type: "keyspace", id: apiId },
    logoUrl: "https://x.test/l.png",
  });
  await h.call("portal.createPortal", {
    slug: "elsewhere",
    displayName: "E",
    mapping: { type: "keyspace", id: await createApi(h, "elsewhere") },
  });
  const inject = (method: "GET" | "POST" | "DELETE", url: string, options: { body?: unknown; headers?: Record<string, string> } = {}) =>
    h.app.inject({
      method,
      url,
      headers: { ...(options.body === undefined ? {} : { "content-type": "application/json" }), ...options.headers },
      ...(options.body === undefined ? {} : { payload: JSON.stringify(options.body) }),
    });

  const code = await mint(h, "pages");
  const redeemed = await inject("POST", "/portal/pages/api/session", { body: { code }, headers: { "x-forwarded-proto": "https" } });
  t.equal(redeemed.statusCode, 200, redeemed.body);
  t.equal(redeemed.headers["cache-control"], "no-store");
  t.match(redeemed.headers["content-security-policy"], /script-src 'self'/);
  const setCookie = String(redeemed.headers["set-cookie"]);
  t.match(setCookie, /^portal_session=pat_[^;]+; Path=\/portal\/pages; Max-Age=86400; HttpOnly; SameSite=Strict; Secure$/);
  const cookie = setCookie.split(";")[0] as string;
  const view = redeemed.json().data;
  t.same(view.portal, { slug: "pages", displayName: "Pages", logoUrl: "https://x.test/l.png" });
  t.equal(view.returnUrl, "https://app.test/back");
  t.same(view.scopes, ["keys:read"]);
  t.notOk(JSON.stringify(view).includes(cookie.split("=")[1] as string), "the token is not in the answer");

  t.equal(
    (await inject("POST", "/portal/pages/api/session", { body: { code }, headers: { cookie } })).statusCode,
    200,
    "a retry holding the session is recognised",
  );
  t.equal((await inject("POST", "/portal/pages/api/session", { body: { code } })).statusCode, 401, "a second redemption without it is not");
  t.equal((await inject("GET", "/portal/pages/api/session", { headers: { cookie } })).json().data.csrfToken, view.csrfToken);
  t.equal((await inject("GET", "/portal/elsewhere/api/session", { headers: { cookie } })).statusCode, 401, "another portal's pages");
  t.equal((await inject("GET", "/portal/Bad_Slug/api/session", { headers: { cookie } })).statusCode, 404);
  const otherCode = await mint(h, "elsewhere");
  t.equal((await inject("POST", "/portal/pages/api/session", { body: { code: otherCode } })).statusCode, 401, "a code of another portal");

  const noCsrf = await inject("POST", "/portal/pages/api/v2/portal.listKeys", { body: {}, headers: { cookie } });
  t.equal(noCsrf.statusCode, 403);
  t.equal(noCsrf.json().error.type.endsWith("csrf_token_invalid"), true);
  const listed = await inject("POST", "/portal/pages/api/v2/portal.listKeys", {
    body: {},
    headers: { cookie, "x-keygate-csrf-token": view.csrfToken },
  });
  t.equal(listed.statusCode, 200);
  t.same(listed.json().data, []);

  t.equal((await inject("DELETE", "/portal/pages/api/session", { headers: { cookie } })).statusCode, 403);
  const out = await inject("DELETE", "/portal/pages/api/session", { headers: { cookie, "x-keygate-csrf-token": view.csrfToken } });
  t.equal(out.statusCode, 200);
  t.match(String(out.headers["set-cookie"]), /^portal_session=; Path=\/portal\/pages; Max-Age=0/);
  const ended = await inject("GET", "/portal/pages/api/session", { headers: { cookie } });
  assertError(
    t,
    { status: ended.statusCode, headers: ended.headers, body: ended.json() },
    "err:unkey:authentication:portal_session_not_found",
  );

  const html = await inject("GET", "/portal/pages?code=whatever");
  t.equal(html.statusCode, 200);
  t.match(html.headers["content-type"], /text\/html/);
  t.equal(html.headers["cache-control"], "no-store");
  t.equal(html.headers["x-frame-options"], "DENY");
  t.notMatch(html.body, /<script>(?!<)/, "no inline script");
  const asset = /src="(\/portal\/_ui\/assets\/[^"]+\.js)"/.exec(html.body)?.[1];
  t.ok(asset, "the page loads its script from /portal/_ui/");
  const script = await inject("GET", asset as string);
  t.equal(script.statusCode, 200);
  t.match(script.headers["cache-control"], /immutable/);
});
