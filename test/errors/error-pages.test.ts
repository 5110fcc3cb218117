import t from "tap";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, type ErrorCode, errorTypeUrl } from "../../src/errors/catalogue.js";
import { harness } from "../helpers/harness.js";

// keygate's own codes link from `error.type` to a page keygate serves (Unkey's site has none for them); Unkey's
// codes keep Unkey's URL, so that clients written for the hosted service recognise them (docs/errors.md#error-pages).

t.test("a keygate code's type is keygate's page of it, which names its status, title and meaning", async (t) => {
  const h = await harness(t);
  const refused = await h.app.inject({ method: "GET", url: "/dashboard/api/session" });
  t.equal(refused.statusCode, 401);
  const type = refused.json().error.type as string;
  t.equal(type, "/v2/errors/keygate/authentication/session_invalid", "relative to the server that answered");

  const page = await h.app.inject({ method: "GET", url: new URL(type, "http://keygate.test/orders/42").pathname });
  t.equal(page.statusCode, 200);
  t.match(page.headers["content-type"], /^text\/html/);
  t.match(page.headers["content-security-policy"], /default-src 'self'/, "served under the dashboard's headers");
  const entry = ERROR_CATALOGUE["err:keygate:authentication:session_invalid"];
  t.match(page.body, "<h1>err:keygate:authentication:session_invalid</h1>");
  t.match(page.body, `${entry.status} ${entry.title}`);
  t.match(
    page.body,
    entry.meaning
      .replace(/`([^`]+)`/g, "<code>$1</code>")
      .replace(/'/g, "&#39;")
      .replace(/"/g, "&#34;"),
  );
});

t.test("Unkey's codes keep Unkey's documentation URL", async (t) => {
  const h = await harness(t);
  const refused = await h.app.inject({ method: "POST", url: "/v2/apis.getApi", payload: { apiId: "api_x" } });
  t.equal(refused.statusCode, 401);
  t.equal(refused.json().error.type, "https://unkey.com/docs/errors/unkey/authentication/missing");
});

t.test("every code of the catalogue has its page, in JSON for a client that asks for it", async (t) => {
  const h = await harness(t);
  for (const code of Object.keys(ERROR_CATALOGUE) as ErrorCode[]) {
    const path = code.split(":").slice(1).join("/");
    const page = await h.app.inject({ method: "GET", url: `/v2/errors/${path}`, headers: { accept: "application/json" } });
    t.same([page.statusCode, page.json()], [200, { code, ...ERROR_CATALOGUE[code] }], code);
    if (code.startsWith("err:keygate:")) t.equal(errorTypeUrl(code, DEFAULT_DOCS_URL), `/v2/errors/${path}`, "its type links there");
  }
  const index = await h.app.inject({ method: "GET", url: "/v2/errors" });
  t.equal(index.statusCode, 200);
  for (const code of Object.keys(ERROR_CATALOGUE)) t.match(index.body, `<code>${code}</code>`, `the index lists ${code}`);
});

t.test("an unknown code is a 404 in the error envelope", async (t) => {
  const h = await harness(t);
  const missing = await h.app.inject({ method: "GET", url: "/v2/errors/keygate/gateway/no_such_thing" });
  t.equal(missing.statusCode, 404);
  t.match(missing.json(), { error: { status: 404, detail: "There is no error code 'err:keygate:gateway:no_such_thing'." } });
});

t.test("with errors.docsUrl set, every code's type is under it, keygate's own too", async (t) => {
  const h = await harness(t, { config: { errors: { docsUrl: "https://keygate.example.com/v2/errors" } } });
  const refused = await h.app.inject({ method: "GET", url: "/dashboard/api/session" });
  t.equal(refused.json().error.type, "https://keygate.example.com/v2/errors/keygate/authentication/session_invalid");
  const unkey = await h.app.inject({ method: "POST", url: "/v2/apis.getApi", payload: { apiId: "api_x" } });
  t.equal(unkey.json().error.type, "https://keygate.example.com/v2/errors/unkey/authentication/missing");
});
