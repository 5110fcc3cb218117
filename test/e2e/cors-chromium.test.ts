import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { harness, WORKSPACE } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { launchBrowser } from "./dashboard-flows.js";

// A page on another origin calls keygate from Chromium: with a cors policy on the route, the browser lets the page
// read keygate's own 401 and 429 (their JSON bodies and status), where a route without one is an opaque failure.

t.setTimeout(180_000);

const API = "api_cors_browser";

t.test("a page on another origin reads keygate's 401 and 429 in Chromium", async (t) => {
  const pages = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>another origin</title><p>calling keygate</p>");
  });
  await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => pages.close(resolve)));
  const pageOrigin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;

  const upstream = await startUpstream(t);
  const cors = { allowOrigins: [{ exact: pageOrigin }], allowHeaders: ["x-client", "authorization"] };
  const h = await harness(t, {
    config: {
      apis: [{ id: API, name: "browser", workspaceId: WORKSPACE }],
      routes: [
        {
          name: "limited",
          match: { prefix: "/limited" },
          upstream: upstream.url,
          workspaceId: WORKSPACE,
          namespaceLimits: [{ namespace: "browser-per-ip", identifier: "ip", limit: 1, duration: 60_000 }],
          cors,
        },
        { name: "secured", match: { prefix: "/secured" }, upstream: upstream.url, apiId: API, cors },
        { name: "no-cors", match: { prefix: "/no-cors" }, upstream: upstream.url, apiId: API },
      ],
    },
  });
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const gateway = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;

  const browser = await launchBrowser(t);
  const page = await browser.newPage();
  await page.goto(`${pageOrigin}/`);
  // In the page: fetch keygate with a header that makes the browser send a preflight first.
  const call = (path: string) =>
    page.evaluate(
      async ({ url }) => {
        try {
          const response = await fetch(url, { headers: { "x-client": "page" } });
          return { status: response.status, body: await response.text(), requestId: response.headers.get("x-request-id") };
        } catch (error) {
          return { error: String(error) };
        }
      },
      { url: `${gateway}${path}` },
    );

  const first = await call("/limited/x");
  t.match(first, { status: 200, requestId: /^req_/ }, "the page reads the upstream's answer and keygate's request id");
  const limited = await call("/limited/x");
  t.match(limited, { status: 429 }, "the page sees the 429 itself");
  t.match(JSON.parse((limited as { body: string }).body), { error: { status: 429, title: "Too Many Requests" } }, "and its JSON body");
  const refused = await call("/secured/x");
  t.match(refused, { status: 401 });
  t.match(JSON.parse((refused as { body: string }).body), { error: { status: 401, type: /missing_key/ } });
  const opaque = await call("/no-cors/x");
  t.match(opaque, { error: /TypeError/ }, "without a cors policy the browser hides keygate's answer");
  t.same(
    upstream.seen.map((seen) => `${seen.method} ${seen.url}`),
    ["GET /limited/x"],
    "the upstream saw the one allowed request: no preflight, no refusal",
  );
});
