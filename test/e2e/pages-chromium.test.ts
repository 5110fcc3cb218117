import type { AddressInfo } from "node:net";
import type { Response } from "playwright-core";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { launchBrowser } from "./dashboard-flows.js";
import { axeViolations, overflowX, screenshot, signIn, VIEWPORTS } from "./page-checks.js";

// Every page of the dashboard and the customer portal, at a laptop's size and a phone's, with something on it:
// axe-core finds no WCAG 2.1 A/AA violation, nothing is wider than the window (wide tables scroll inside their
// card), no request 404s (the favicon included), the navigation fits at 1280 px and folds behind a Menu button at
// 390 px. A screenshot of each is kept in test-results/pages/.

t.setTimeout(600_000);

t.test("the dashboard's and the portal's pages at 1280×800 and 390×844", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      analytics: { engine: "embedded", path: analyticsDir(t), buffer: { flushIntervalMs: 50 } },
      apis: [{ id: "api_pages_orders", name: "orders", workspaceId: "ws_test" }],
      routes: [{ name: "orders-route", match: { prefix: "/orders" }, upstream: upstream.url, apiId: "api_pages_orders" }],
    },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const ok = async (procedure: string, body: unknown) => {
    const answer = await h.call(procedure, body);
    if (answer.status !== 200) throw new Error(`${procedure}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.data;
  };

  // Something on every page: keys (one with a long meta), an identity, a permission and a role, an override, a
  // root key, a webhook, a route with policies, a portal, their audit entries and some verifications.
  const apiId = "api_pages_orders";
  const { key } = await ok("keys.createKey", {
    apiId,
    name: "production server",
    externalId: "customer_pages",
    permissions: ["orders.read"],
    credits: { remaining: 100, refill: { interval: "daily", amount: 100 } },
    ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: true }],
  });
  await ok("keys.createKey", { apiId, name: "staging", externalId: "customer_pages", meta: { plan: "pro", region: "eu-west-1" } });
  for (let i = 0; i < 3; i++) await ok("keys.verifyKey", { key });
  await ok("keys.verifyKey", { key: "not_a_key_at_all" });
  await ok("identities.createIdentity", { externalId: "tenant_42", meta: { plan: "enterprise" } });
  await ok("permissions.createPermission", { name: "Write orders", slug: "orders.write" });
  await ok("permissions.createRole", { name: "writer", permissions: ["orders.read", "orders.write"] });
  await ok("ratelimit.limit", { namespace: "pages.api", identifier: "user_1", limit: 10, duration: 60_000 });
  await ok("ratelimit.setOverride", { namespace: "pages.api", identifier: "user_vip", limit: 500, duration: 60_000 });
  await ok("keygate.createRootKey", { name: "reader", permissions: ["api.*.read_api"] });
  await ok("keygate.createWebhook", { url: "https://hooks.example.com/keygate", events: ["key.created", "ratelimit.exceeded"] });
  const route = await ok("keygate.createRoute", { name: "billing", match: { prefix: "/billing" }, upstream: upstream.url });
  await ok("keygate.updateRoute", {
    route: route.id,
    policies: [{ name: "api keys", enabled: true, keyauth: { keyspaces: [apiId], permissionQuery: "orders.read" } }],
  });
  await ok("portal.createPortal", {
    slug: "acme",
    displayName: "Acme API",
    mapping: { type: "keyspace", id: apiId },
    enabled: true,
    primaryColor: "#0f766e",
    keyDefaults: { prefix: "acme", permissions: ["orders.read"] },
  });
  const through = await fetch(`${origin}/orders/1`, { headers: { authorization: `Bearer ${key}` } });
  t.equal(through.status, 200, "a request through the gateway, for its traffic chart");
  await through.arrayBuffer();

  const dashboardPages = [
    ["apis", "#/apis", "APIs"],
    ["keys", `#/apis/${apiId}`, "Keys of orders"],
    ["identities", "#/identities", "Identities"],
    ["access", "#/access", "Permissions and roles"],
    ["ratelimits", "#/ratelimits", "Rate limits"],
    ["root-keys", "#/root-keys", "Root keys"],
    ["analytics", "#/analytics", "Analytics"],
    ["gateway", "#/gateway", "Gateway routes"],
    ["webhooks", "#/webhooks", "Webhooks"],
    ["audit-log", "#/audit-log", "Audit log"],
    ["portals", "#/portals", "Portals"],
  ] as const;

  const browser = await launchBrowser(t);
  const results: string[] = [];
  for (const viewport of VIEWPORTS) {
    const size = `${viewport.width}×${viewport.height}`;
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const missing: string[] = [];
    const problems: string[] = [];
    page.on("response", (response: Response) => {
      if (response.status() === 404) missing.push(response.url());
    });
    page.on("pageerror", (error) => problems.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error" && !/status of 401/.test(message.text())) problems.push(message.text());
    });

    /** The checks every page gets, then its screenshot. */
    const check = async (name: string) => {
      const violations = await axeViolations(page);
      t.same(violations, [], `${name} at ${size}: axe-core finds no WCAG 2.1 A/AA violation`);
      t.equal(await overflowX(page), 0, `${name} at ${size}: nothing wider than the window`);
      const path = await screenshot(page, name);
      results.push(`${name} ${size}: ${violations.length} violations, ${path}`);
    };

    await page.goto(`${origin}/dashboard/`);
    await page.getByRole("heading", { name: "Sign in to keygate" }).waitFor();
    await check("dashboard-sign-in");
    await signIn(page, origin);

    const menu = page.getByRole("button", { name: "Menu" });
    const navigation = page.getByRole("navigation", { name: "Main" });
    if (viewport.width >= 1280) {
      t.notOk(await menu.isVisible(), `${size}: no Menu button`);
      for (const [, , heading] of dashboardPages.filter(([name]) => name !== "keys"))
        t.ok(
          await navigation.getByRole("link", { name: heading === "Gateway routes" ? "Gateway" : heading }).isVisible(),
          `${heading} in view`,
        );
      const box = await navigation.boundingBox();
      t.ok(box && box.y + box.height <= viewport.height, "the whole navigation fits in the window's height");
    } else {
      t.ok(await menu.isVisible(), `${size}: a Menu button`);
      t.notOk(await navigation.isVisible(), "the navigation is folded away");
      t.equal(await menu.getAttribute("aria-expanded"), "false");
      await menu.click();
      t.equal(await menu.getAttribute("aria-expanded"), "true");
      await navigation.getByRole("link", { name: "Identities" }).click();
      await page.getByRole("heading", { name: "Identities", exact: true }).waitFor();
      t.notOk(await navigation.isVisible(), "following a link folds it again");
    }

    for (const [name, hash, heading] of dashboardPages) {
      await page.goto(`${origin}/dashboard/${hash}`);
      await page.getByRole("heading", { name: heading, exact: true }).waitFor();
      // Each page's data (or its empty state) in place before it is judged.
      await page.waitForLoadState("networkidle");
      if (name === "analytics") await page.locator(".uplot").first().waitFor();
      await check(`dashboard-${name}`);
    }

    // The customer's view: keys and usage, from a session link; and a link that cannot be used.
    const { url } = await ok("portal.createSession", {
      portal: "acme",
      externalId: "customer_pages",
      scopes: ["keys:read", "keys:create", "keys:reroll", "analytics:read"],
      returnUrl: "https://app.example.com/settings",
    });
    await page.goto(url.replace(/^http:\/\/[^/]+/, origin));
    await page.getByRole("heading", { name: "Your API keys" }).waitFor();
    await page.locator("[data-key-id]").first().waitFor();
    await page.locator(".uplot").first().waitFor();
    await page.waitForLoadState("networkidle");
    await check("portal");
    await page.goto(`${origin}/portal/acme?code=pst_never_issued`);
    await page.getByTestId("portal-error").waitFor();
    await check("portal-error");

    t.same(missing, [], `${size}: no request answered 404 (the favicon is there)`);
    t.same(problems, [], `${size}: no script error, no CSP violation`);
    await context.close();
  }
  const favicon = await fetch(`${origin}/dashboard/`).then((answer) => answer.text());
  t.match(favicon, /<link rel="icon" type="image\/svg\+xml" href="\.\/assets\/favicon-[^"]+\.svg"/, "the dashboard names its icon");
  t.comment(results.join("\n"));
});
