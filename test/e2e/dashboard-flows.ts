import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";
import type { Test } from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { type Harness, harness, ROOT_KEY, type StorageKind } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";

/** Debian's Chromium unless CHROMIUM_PATH names another; a test fails, rather than passes over its steps, when it cannot start. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Screenshots of failed steps go here (and the README's, unless KEYGATE_WRITE_SCREENSHOT asks for docs/). */
const RESULTS = join(process.cwd(), "test-results");

/** Clicks a Refresh button and waits until the first query it sends is answered, so that refreshes do not pile up. */
async function refresh(button: Locator): Promise<void> {
  const answered = button.page().waitForResponse((response) => response.url().includes("/api/analytics."), { timeout: 10_000 });
  await button.click();
  await answered;
}

export async function launchBrowser(t: Test): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  return browser;
}

/** The harness's app listening on a free port, and a Chromium page signed in to its dashboard with ROOT_KEY. */
export async function signedInDashboard(t: Test, h: Harness): Promise<Page> {
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const browser = await launchBrowser(t);
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await page.goto(`${origin}/dashboard`);
  await page.getByLabel("Root key").fill(ROOT_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  return page;
}

/**
 * What a dashboard user does (sign in, keys, credits and limits, root keys, analytics, the gateway and rate limit
 * pages, sign out), through the dashboard in a real browser, on a keygate listening on a real port with the
 * embedded analytics engine. Elements are found by role and label, as a user finds them.
 */
export async function dashboardFlows(t: Test, storage: StorageKind): Promise<void> {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    storage,
    config: {
      analytics: { engine: "embedded", path: analyticsDir(t), buffer: { flushIntervalMs: 50 } },
      apis: [{ id: "api_e2e_gateway", name: "gateway-api", workspaceId: "ws_test" }],
      routes: [
        {
          name: "e2e-route",
          match: { prefix: "/e2e", methods: ["GET"] },
          upstream: "http://127.0.0.1:9",
          apiId: "api_e2e_gateway",
          permissions: "e2e.read",
          credits: { cost: 3 },
        },
        { name: "e2e-upstream", match: { prefix: "/up" }, upstream: upstream.url, apiId: "api_e2e_gateway" },
        {
          name: "e2e-pool",
          match: { prefix: "/pool" },
          upstream: { targets: [{ url: upstream.url, weight: 2 }, { url: "http://127.0.0.1:9" }], balance: "least-connections" },
          apiId: "api_e2e_gateway",
        },
      ],
    },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const browser = await launchBrowser(t);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  let failed = 0;

  /** A named step: on failure, a screenshot of the page as it was, then the failure. */
  const step = async (name: string, run: () => Promise<void>) => {
    await t.test(name, async (t) => {
      try {
        await run();
      } catch (error) {
        mkdirSync(RESULTS, { recursive: true });
        const path = join(RESULTS, `dashboard-${storage}-${++failed}.png`);
        await page.screenshot({ path, fullPage: true }).catch(() => {});
        t.comment(`screenshot: ${path}`);
        throw error;
      }
    });
  };
  const verify = async (key: string) => {
    const response = await fetch(`${origin}/v2/keys.verifyKey`, {
      method: "POST",
      headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ key }),
    });
    return ((await response.json()) as { data: { valid: boolean; code: string; credits?: number } }).data;
  };
  const signIn = async (rootKey: string) => {
    await page.goto(`${origin}/dashboard`);
    await page.getByLabel("Root key").fill(rootKey);
    await page.getByRole("button", { name: "Sign in" }).click();
  };
  const signOut = async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to keygate" }).waitFor();
  };

  await step("a bad root key is refused and opens no session", async () => {
    await signIn("root_not_a_real_key");
    await page.getByRole("alert").filter({ hasText: "invalid" }).waitFor();
    t.same(await context.cookies(), [], "no cookie");
  });

  await step("a good root key signs in; the page carries the security headers; nothing is kept in storage", async () => {
    const response = await page.goto(`${origin}/dashboard/`);
    t.match(response?.headers()["content-security-policy"], /script-src 'self'/);
    t.equal(response?.headers()["x-frame-options"], "DENY");
    await page.getByLabel("Root key").fill(ROOT_KEY);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "APIs" }).waitFor();
    const [cookie] = await context.cookies();
    t.match(cookie, { name: "keygate_session", httpOnly: true, sameSite: "Strict", path: "/dashboard" });
    t.equal(await page.evaluate("localStorage.length + sessionStorage.length"), 0);
  });

  await step("a 400 is shown next to the field it names", async () => {
    await page.getByLabel("API name").fill("x");
    await page.getByRole("button", { name: "Create API" }).click();
    await page.getByText("must be at least 3 characters long").waitFor();
  });

  let key = "";
  await step("create an API and a key; the key is shown once and found in the list", async () => {
    await page.getByLabel("API name").fill("orders");
    await page.getByRole("button", { name: "Create API" }).click();
    await page.getByRole("link", { name: "orders" }).click();
    await page.getByRole("heading", { name: "Keys of orders" }).waitFor();
    await page.getByText("Create a key").click();
    const form = page.getByRole("form", { name: "Create a key" });
    await form.getByLabel("Name", { exact: true }).fill("e2e key");
    await form.getByLabel("External id").fill("user_e2e");
    await form.getByLabel("Remaining credits").fill("10");
    await form.getByRole("button", { name: "Create key" }).click();
    await page.getByText("shown once").waitFor();
    key = (await page.locator("output[aria-label='New key']").textContent()) ?? "";
    t.match(key, /^[1-9A-HJ-NP-Za-km-z]{10,}$/);
    await page.getByRole("button", { name: "Done" }).click();
    t.equal(await page.getByText(key).count(), 0, "gone once dismissed");
    await page.getByRole("table", { name: "Keys" }).getByRole("cell", { name: "e2e key" }).waitFor();
    await page.getByLabel("Filter by external id").fill("user_e2e");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("table", { name: "Keys" }).getByRole("cell", { name: "user_e2e" }).waitFor();
    t.match(await verify(key), { valid: true, code: "VALID", credits: 9 });
  });

  await step("the keys of an API are listed by pages of 25", async () => {
    const apiId = decodeURIComponent(/#\/apis\/([^/?]+)/.exec(page.url())?.[1] ?? "");
    for (let i = 0; i < 25; i++) t.equal((await h.call("keys.createKey", { apiId, name: `paged key ${i}` })).status, 200);
    const rows = page.getByRole("table", { name: "Keys" }).getByRole("row");
    const pager = page.getByRole("navigation", { name: "Pages of keys" });
    const rowsBecome = (count: number) =>
      waitFor(`the keys table shows ${count} rows`, 10_000, async (because) => {
        const shown = await rows.count();
        because(`it shows ${shown}`);
        return shown === count ? true : undefined;
      });
    await page.getByLabel("Filter by external id").fill("");
    await page.getByRole("button", { name: "Filter" }).click();
    await rowsBecome(26);
    t.ok(await pager.getByRole("button", { name: "Previous page" }).isDisabled(), "no page before the first");
    await pager.getByRole("button", { name: "Next page" }).click();
    await rowsBecome(2);
    t.ok(await pager.getByRole("button", { name: "Next page" }).isDisabled(), "the 26th key is on the last page");
    await pager.getByRole("button", { name: "Previous page" }).click();
    await rowsBecome(26);
    // Back to the one key the next steps edit.
    await page.getByLabel("Filter by external id").fill("user_e2e");
    await page.getByRole("button", { name: "Filter" }).click();
    await rowsBecome(2);
  });

  await step("editing credits and rate limits takes effect in verification", async () => {
    await page.getByRole("button", { name: /^Edit key_/ }).click();
    const form = page.getByRole("form", { name: "Edit the key" });
    await form.getByLabel("Remaining credits").fill("1");
    await form.getByRole("button", { name: "Save key" }).click();
    await form.waitFor({ state: "detached" });
    t.match(await verify(key), { valid: true, credits: 0 });
    t.match(await verify(key), { valid: false, code: "USAGE_EXCEEDED" });

    await page.getByRole("button", { name: /^Edit key_/ }).click();
    await form.getByLabel("Remaining credits").fill("");
    await form.getByRole("button", { name: "Add a rate limit" }).click();
    await form.getByLabel("Limit name").fill("burst");
    await form.getByLabel("Requests").fill("1");
    await form.getByRole("button", { name: "Save key" }).click();
    await form.waitFor({ state: "detached" });
    t.match(await verify(key), { valid: true });
    t.match(await verify(key), { valid: false, code: "RATE_LIMITED" });
  });

  await step("deleting the key makes verification fail", async () => {
    await page.getByRole("button", { name: /^Edit key_/ }).click();
    await page.getByRole("button", { name: "Delete key" }).click();
    const confirmation = page.getByRole("dialog", { name: /^Delete key key_/ });
    t.match(await confirmation.textContent(), /refused at once/, "the confirmation says what is lost");
    await confirmation.getByRole("button", { name: "Confirm deleting the key" }).click();
    await page.getByRole("cell", { name: "No keys with this external id." }).waitFor();
    t.match(await verify(key), { valid: false, code: "NOT_FOUND" });
  });

  let reader = "";
  await step("a root key with fewer permissions is created, shown once, and refused what it may not do (charts too)", async () => {
    await page.getByRole("link", { name: "Root keys" }).click();
    await page.getByLabel("Root key name").fill("reader");
    await page.getByLabel("Root key permissions").fill("api.*.read_api\napi.*.read_key\ngateway.*.read_route");
    await page.getByRole("button", { name: "Create root key" }).click();
    await page.getByText("shown once").waitFor();
    reader = (await page.locator("output[aria-label='New root key']").textContent()) ?? "";
    t.match(reader, /^root_/);
    await page.getByRole("table", { name: "Root keys" }).getByRole("cell", { name: "reader", exact: true }).waitFor();
    await signOut();
    await signIn(reader);
    await page.getByRole("heading", { name: "APIs" }).waitFor();
    await page.getByRole("link", { name: "orders" }).waitFor();
    await page.getByLabel("API name").fill("not-allowed");
    await page.getByRole("button", { name: "Create API" }).click();
    await page.getByRole("alert").filter({ hasText: "Not allowed" }).filter({ hasText: "api.*.create_api" }).waitFor();
    await page.getByRole("link", { name: "Root keys" }).click();
    await page.getByRole("alert").filter({ hasText: "root_key.*.read_root_key" }).waitFor();
    await page.getByLabel("Root key permissions").fill("*");
    await page.getByRole("button", { name: "Create root key" }).click();
    await page.getByRole("alert").filter({ hasText: "root_key.*.create_root_key" }).waitFor();
    // Charts it may not read say so, beside what it may read (the routes).
    await page.getByRole("link", { name: "Gateway" }).click();
    await page.getByRole("table", { name: "Gateway routes" }).getByRole("cell", { name: "e2e-route" }).waitFor();
    const traffic = page.getByRole("region", { name: "Gateway traffic" });
    await traffic.getByRole("alert").filter({ hasText: "Not allowed" }).filter({ hasText: "api.*.read_analytics" }).waitFor();
    await page.getByRole("link", { name: "Rate limits" }).click();
    const decisions = page.getByRole("region", { name: "Rate limit decisions" });
    await decisions.getByRole("alert").filter({ hasText: "Not allowed" }).filter({ hasText: "ratelimit.*.read_analytics" }).waitFor();
    await signOut();
  });

  await step("the analytics chart shows the verifications just made; the SQL console answers in a table", async () => {
    await signIn(ROOT_KEY);
    await page.getByRole("link", { name: "Analytics" }).click();
    // Events reach the engine in batches: refresh until they are there.
    const summary = page.getByRole("region", { name: "Verifications over time" }).locator("p");
    await waitFor("the chart counts the 6 verifications", 30_000, async (because) => {
      const text = (await summary.textContent()) ?? "";
      if (/^(\d+) verifications/.test(text) && Number(text.split(" ")[0]) >= 6) return true;
      because(`it says "${text}"`);
      await refresh(page.getByRole("button", { name: "Refresh" }));
      return undefined;
    });
    t.match(await summary.textContent(), /^6 verifications in range$/);
    await page.getByLabel("Only API").selectOption({ label: "gateway-api" });
    await page.getByText("0 verifications in range").waitFor();
    await page.getByLabel("Only API").selectOption({ label: "orders" });
    await page.getByText("5 verifications in range").waitFor();
    await page.getByLabel("Only API").selectOption({ label: "every API" });
    await page.getByText("6 verifications in range").waitFor();
    await page.locator(".uplot canvas").first().waitFor();
    for (const outcome of ["VALID", "USAGE_EXCEEDED", "RATE_LIMITED", "NOT_FOUND"]) {
      t.ok(await page.locator(".u-legend").getByText(outcome).count(), `the chart has a ${outcome} series`);
    }
    await page.getByRole("table", { name: "Denials" }).getByRole("cell", { name: "RATE_LIMITED" }).waitFor();
    await page.getByRole("button", { name: "Run query" }).click();
    await page.getByRole("table", { name: "Query result" }).getByRole("cell", { name: "VALID", exact: true }).waitFor();
    if (storage === "memory") {
      const path = process.env.KEYGATE_WRITE_SCREENSHOT
        ? join(process.cwd(), "docs", "images", "dashboard.png")
        : join(RESULTS, "dashboard.png");
      mkdirSync(join(path, ".."), { recursive: true });
      await page.evaluate("scrollTo(0, 0)");
      await page.screenshot({ path });
      t.comment(`README screenshot: ${path}`);
    }
  });

  await step("the gateway page shows the configured routes with their policies", async () => {
    await page.getByRole("link", { name: "Gateway" }).click();
    const row = page.getByRole("table", { name: "Gateway routes" }).getByRole("row").filter({ hasText: "e2e-route" });
    await row.waitFor();
    const text = (await row.textContent()) ?? "";
    for (const part of ["GET /e2e", "Authorization: Bearer <key>", "e2e.read", "api_e2e_gateway", "http://127.0.0.1:9"]) {
      t.match(text, part, `the route shows ${part}`);
    }
    const pool = page.getByRole("table", { name: "Gateway routes" }).getByRole("row").filter({ hasText: "e2e-pool" });
    const targets = await pool.getByRole("list", { name: "Upstream targets" }).getByRole("listitem").allTextContents();
    t.same(
      targets.map((target) => target.replace(/\s+/g, " ").trim()),
      [`${upstream.url} ×2 in`, "http://127.0.0.1:9 ×1 in"],
      "a pool's targets are shown with their weight and state",
    );
    t.match((await pool.textContent()) ?? "", "pool, least-connections");
  });

  await step(
    "identities (with their rate limits), permissions and roles, and rate limit overrides: create, list, edit, delete",
    async () => {
      await page.getByRole("link", { name: "Identities" }).click();
      await page.getByLabel("Identity external id").fill("customer_e2e");
      await page.getByLabel("Identity meta (JSON)").fill('{"plan":"pro"}');
      await page.getByRole("button", { name: "Create identity" }).click();
      const identities = page.getByRole("table", { name: "Identities" });
      await identities.getByRole("cell", { name: "customer_e2e", exact: true }).waitFor();
      await identities.getByRole("cell", { name: '{"plan":"pro"}' }).waitFor();
      await page.getByRole("button", { name: "Edit customer_e2e" }).click();
      const editor = page.getByRole("form", { name: "Edit the identity" });
      await editor.getByRole("button", { name: "Add a rate limit" }).click();
      await editor.getByLabel("Limit name").fill("tenant");
      await editor.getByLabel("Requests").fill("5");
      await editor.getByRole("button", { name: "Save identity" }).click();
      await editor.waitFor({ state: "detached" });
      await identities.getByRole("cell", { name: "tenant: 5/60000 ms" }).waitFor();
      // Identity credits (keygate's extension) are shown: given over the API, read on the next load of the page.
      const credited = await h.call("identities.updateIdentity", {
        identity: "customer_e2e",
        credits: { remaining: 40, refill: { interval: "daily", amount: 50 }, lowThreshold: 5 },
      });
      t.equal(credited.status, 200);
      await page.getByRole("link", { name: "Permissions and roles" }).click();
      await page.getByRole("link", { name: "Identities" }).click();
      await identities.getByRole("cell", { name: "40, refills to 50 daily, low at 5" }).waitFor();
      await page.getByRole("button", { name: "Delete customer_e2e" }).click();
      await page.getByRole("button", { name: "Confirm deleting customer_e2e" }).click();
      await identities.getByRole("cell", { name: "customer_e2e", exact: true }).waitFor({ state: "detached" });

      await page.getByRole("link", { name: "Permissions and roles" }).click();
      await page.getByLabel("Permission slug").fill("documents.read");
      await page.getByLabel("Permission name").fill("Read documents");
      await page.getByRole("button", { name: "Create permission" }).click();
      await page.getByRole("table", { name: "Permissions" }).getByRole("cell", { name: "documents.read", exact: true }).waitFor();
      await page.getByLabel("Role name", { exact: true }).fill("reader");
      await page.getByLabel("Role permissions").fill("documents.read");
      await page.getByRole("button", { name: "Create role" }).click();
      const role = page.getByRole("table", { name: "Roles" }).getByRole("row").filter({ hasText: "reader" });
      await role.getByRole("cell", { name: "documents.read", exact: true }).waitFor();
      await page.getByRole("button", { name: "Delete role reader" }).click();
      await page.getByRole("button", { name: "Confirm deleting reader" }).click();
      await role.waitFor({ state: "detached" });

      // A namespace comes into being with its first use.
      const used = await fetch(`${origin}/v2/ratelimit.limit`, {
        method: "POST",
        headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ namespace: "e2e.ns", identifier: "someone", limit: 10, duration: 60_000 }),
      });
      t.equal(used.status, 200);
      await used.arrayBuffer();
      await page.getByRole("link", { name: "Rate limits" }).click();
      // Picked from the workspace's namespaces, by name.
      await page.getByRole("combobox", { name: "Namespace" }).selectOption("e2e.ns");
      await page.getByRole("button", { name: "Show overrides" }).click();
      await page.getByRole("textbox", { name: "Identifier" }).fill("user_vip");
      await page.getByRole("spinbutton", { name: "Limit" }).fill("500");
      await page.getByRole("button", { name: "Set override" }).click();
      await page.getByRole("table", { name: "Overrides" }).getByRole("cell", { name: "user_vip", exact: true }).waitFor();
      await page.getByRole("button", { name: "Delete override user_vip" }).click();
      await page.getByRole("button", { name: "Confirm deleting the override for user_vip" }).click();
      await page.getByRole("cell", { name: "No overrides in e2e.ns." }).waitFor();
    },
  );

  await step("the gateway page charts the requests just answered, per route; the rate limits page charts decisions", async () => {
    // Requests through the gateway, each recorded by it: one forwarded, one the upstream fails, two refused.
    const created = await h.call("keys.createKey", { apiId: "api_e2e_gateway" });
    const gatewayKey = (created.body as { data: { key: string } }).data.key;
    for (const [path, withKey, status] of [
      ["/up/items", true, 200],
      ["/up/status/503", true, 503],
      ["/up/items", false, 401],
      ["/e2e/items", true, 403], // the key lacks e2e.read
    ] as const) {
      const answer = await fetch(`${origin}${path}`, withKey ? { headers: { authorization: `Bearer ${gatewayKey}` } } : {});
      await answer.arrayBuffer();
      t.equal(answer.status, status, `${path} answers ${status}`);
    }
    // Rate limit decisions are recorded by ratelimit.limit itself: two pass, the third is blocked.
    for (const expected of [true, true, false]) {
      const decided = await fetch(`${origin}/v2/ratelimit.limit`, {
        method: "POST",
        headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ namespace: "e2e.charts", identifier: "greedy_client", limit: 2, duration: 60_000 }),
      });
      t.equal(((await decided.json()) as { data: { success: boolean } }).data.success, expected);
    }
    /** The cells of a table row, none while it is absent. */
    const cellsOf = async (row: Locator) => ((await row.count()) === 0 ? [] : row.getByRole("cell").allTextContents());
    /**
     * Events reach the engine in batches, and a page's queries run side by side, so one may see a batch another
     * did not: refresh until `ready` holds for all of them.
     */
    const refreshUntil = (region: string, ready: () => Promise<boolean>) =>
      waitFor(`the ${region} region shows every event`, 30_000, async () => {
        if (await ready()) return true;
        await refresh(page.getByRole("region", { name: region }).getByRole("button", { name: "Refresh" }));
        return undefined;
      });

    await page.getByRole("link", { name: "Gateway" }).click();
    const byRoute = page.getByRole("table", { name: "Requests by route" });
    const routeRow = (name: string) => byRoute.getByRole("row").filter({ has: page.getByRole("cell", { name, exact: true }) });
    // Columns: route, requests, errors_5xx, refusals_4xx, then latencies.
    const counted = async (name: string) => (await cellsOf(routeRow(name))).slice(0, 4);
    const charts = [
      "Requests per route: e2e-route, e2e-upstream",
      "Server errors (5xx) per route: e2e-route, e2e-upstream",
      "Refusals (4xx) per route: e2e-route, e2e-upstream",
      "Latency per route: e2e-route p50, e2e-route p99, e2e-upstream p50, e2e-upstream p99",
      "keygate's own latency per route: e2e-route p50, e2e-route p99, e2e-upstream p50, e2e-upstream p99",
    ].map((name) => page.getByRole("img", { name, exact: true }));
    const everyChartShown = async () => (await Promise.all(charts.map((chart) => chart.count()))).every((count) => count === 1);
    await refreshUntil(
      "Gateway traffic",
      async () => (await counted("e2e-upstream"))[1] === "3" && (await counted("e2e-route"))[1] === "1" && (await everyChartShown()),
    );
    t.same(await counted("e2e-upstream"), ["e2e-upstream", "3", "1", "1"], "3 requests: one 5xx, one 4xx");
    t.same(await counted("e2e-route"), ["e2e-route", "1", "0", "1"], "1 request, refused");
    for (const chart of charts) await chart.locator("canvas").waitFor();
    // Another range is another query (hour buckets): accepted, and it counts the same requests.
    const answered = page.waitForResponse((response) => response.url().endsWith("/analytics.getGatewayRequests"));
    await page.getByLabel("Time range").selectOption({ label: "Last 24 hours" });
    t.equal((await answered).status(), 200);
    t.same(await counted("e2e-upstream"), ["e2e-upstream", "3", "1", "1"], "the same over 24 hours");

    await page.getByRole("link", { name: "Rate limits" }).click();
    const blocked = page.getByRole("table", { name: "Top blocked identifiers" }).getByRole("row").filter({ hasText: "greedy_client" });
    // Analytics rows name namespaces by id; the page shows their names.
    const namespaceRow = (name: string) =>
      page
        .getByRole("table", { name: "Decisions by namespace" })
        .getByRole("row")
        .filter({ has: page.getByRole("cell", { name, exact: true }) });
    const decisionsChart = page.getByRole("img", { name: "Passed and blocked per namespace: e2e.charts passed, e2e.charts blocked" });
    await refreshUntil("Rate limit decisions", async () => {
      const [, , , decisions] = await cellsOf(blocked);
      return decisions === "3" && (await cellsOf(namespaceRow("e2e.charts")))[1] === "2" && (await decisionsChart.count()) === 1;
    });
    t.same(await cellsOf(blocked), ["e2e.charts", "greedy_client", "1", "3"], "1 of its 3 decisions blocked");
    const namespace = namespaceRow("e2e.charts");
    t.same(await namespace.getByRole("cell").allTextContents(), ["e2e.charts", "2", "1"], "2 passed, 1 blocked");
    // The 30 days read the per-day aggregate: the same decisions.
    const answered30 = page.waitForResponse((response) => response.url().endsWith("/analytics.getRatelimits"));
    await page.getByLabel("Time range").selectOption({ label: "Last 30 days" });
    t.equal((await answered30).status(), 200);
    await page.getByRole("region", { name: "Rate limit decisions" }).getByRole("alert").waitFor({ state: "detached" });
    t.same(await namespace.getByRole("cell").allTextContents(), ["e2e.charts", "2", "1"], "the same over 30 days");
    await decisionsChart.locator("canvas").waitFor();
  });

  /** A request through the gateway: its status, the body read to the end. */
  const through = async (path: string, key?: string, method = "GET") => {
    const answer = await fetch(`${origin}${path}`, { method, ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}) });
    await answer.arrayBuffer();
    return answer.status;
  };
  const routeEditor = page.getByRole("region", { name: "Route dash-route" });
  const policyForm = routeEditor.getByRole("form", { name: "Edit the policies" });
  const policyGroup = (place: number, name: string) => policyForm.getByRole("group", { name: new RegExp(`^Policy ${place}: ${name} `) });
  /** Saves the policies once the page has taken up the changes, and waits until the page says they are saved. */
  const savePolicies = async () => {
    await policyForm.getByRole("status").filter({ hasText: "Unsaved changes." }).waitFor();
    await policyForm.getByRole("button", { name: "Save policies" }).click();
    await policyForm.getByRole("status").filter({ hasText: "Policies saved." }).waitFor();
  };
  const routesTable = page.getByRole("table", { name: "Gateway routes" });
  const routeRow = (name: string) => routesTable.getByRole("row").filter({ has: page.getByRole("cell", { name, exact: true }) });
  let plainKey = "";
  let adminKey = "";

  await step("a route is created on the Gateway page; without policies it forwards every request", async () => {
    await page.getByRole("link", { name: "APIs", exact: true }).click();
    await page.getByLabel("API name").fill("routes-api");
    await page.getByRole("button", { name: "Create API" }).click();
    await page.getByRole("link", { name: "routes-api" }).waitFor();
    const apis = (await h.call("keygate.listApis", {})).body as { data: { id: string; name: string }[] };
    const apiId = apis.data.find((api) => api.name === "routes-api")?.id ?? "";
    plainKey = ((await h.call("keys.createKey", { apiId })).body as { data: { key: string } }).data.key;
    adminKey = ((await h.call("keys.createKey", { apiId, permissions: ["routes.admin"] })).body as { data: { key: string } }).data.key;

    await page.getByRole("link", { name: "Gateway", exact: true }).click();
    await page.getByText("Create a route").click();
    const create = page.getByRole("form", { name: "Create a route" });
    await create.getByLabel("Route name").fill("dash-route");
    await create.getByLabel("Path prefix").fill("/dash");
    await create.getByLabel("Upstream URL").fill("ftp://127.0.0.1");
    await create.getByLabel("Timeout (ms)").fill("5000");
    await create.getByLabel("Header name for the key id").fill("x-dash-key-id");
    await create.getByRole("button", { name: "Create route" }).click();
    await create.getByText("must be an http:// or https:// URL with a host").waitFor();
    await create.getByLabel("Upstream URL").fill(upstream.url);
    await create.getByRole("button", { name: "Create route" }).click();
    await routeEditor.waitFor();
    await routeRow("dash-route").getByRole("cell", { name: "none", exact: true }).waitFor();
    t.equal(await through("/dash/items"), 200, "no policy: forwarded without a key");
  });

  await step("a keyauth and a ratelimit policy, saved at once: 401 without a key, 200 with one, 429 past the limit", async () => {
    await policyForm.getByLabel("Kind of policy").selectOption("keyauth");
    await policyForm.getByRole("button", { name: "Add policy" }).click();
    await policyGroup(1, "keyauth")
      .getByRole("checkbox", { name: /^routes-api / })
      .check();
    await policyForm.getByLabel("Kind of policy").selectOption("ratelimit");
    await policyForm.getByRole("button", { name: "Add policy" }).click();
    const limit = policyGroup(2, "ratelimit");
    await limit.getByLabel("Limit", { exact: true }).fill("2");
    await limit.getByLabel("Window (ms)").fill("60000");
    t.equal(await limit.getByLabel("Identifier 1", { exact: true }).inputValue(), "remoteIp", "counted by the client IP");
    await savePolicies();
    const row = (await routeRow("dash-route").textContent()) ?? "";
    t.match(row, "keyauth (keyauth): APIs api_", "the table shows the keyauth policy");
    t.match(row, "ratelimit (ratelimit): 2 per 60000 ms by client IP", "and the rate limit");

    t.equal(await through("/dash/items"), 401, "no key");
    const seen = upstream.seen.length;
    t.equal(await through("/dash/items", plainKey), 200, "a key of the API");
    t.match(upstream.seen[seen]?.headers["x-dash-key-id"], /^key_/, "the key id header the route forwards");
    t.equal(await through("/dash/items", plainKey), 200, "the second request in the window");
    t.equal(await through("/dash/items", plainKey), 429, "the third is over the limit");
  });

  await step("a disabled policy stops applying; a keyauth moved first decides; match expressions narrow a policy", async () => {
    await policyGroup(2, "ratelimit").getByLabel("Enabled").uncheck();
    await savePolicies();
    await routeRow("dash-route").getByText("ratelimit (ratelimit, disabled)").waitFor();
    t.equal(await through("/dash/items", plainKey), 200, "no rate limit once disabled");

    // A second keyauth asking for a permission: after the first one it is never used, moved first it decides.
    await policyForm.getByLabel("Kind of policy").selectOption("keyauth");
    await policyForm.getByRole("button", { name: "Add policy" }).click();
    const admins = policyGroup(3, "keyauth-2");
    await admins.getByLabel("Policy name").fill("admins");
    await policyGroup(3, "admins")
      .getByRole("checkbox", { name: /^routes-api / })
      .check();
    await policyGroup(3, "admins").getByLabel("Permission query").fill("routes.admin");
    await savePolicies();
    t.equal(await through("/dash/items", plainKey), 200, "the first keyauth takes any key of the API");
    await policyForm.getByRole("button", { name: "Move policy admins up" }).click();
    await policyForm.getByRole("button", { name: "Move policy admins up" }).click();
    await policyGroup(1, "admins").waitFor();
    await savePolicies();
    t.match((await routeRow("dash-route").locator("ol li").first().textContent()) ?? "", /^admins \(keyauth\)/, "listed first");
    t.equal(await through("/dash/items", plainKey), 403, "moved first, it asks for routes.admin");
    t.equal(await through("/dash/items", adminKey), 200, "which the admin key has");

    // Only under /dash/admin: elsewhere the next keyauth applies.
    const first = policyGroup(1, "admins");
    await first.getByRole("button", { name: "Add a condition" }).click();
    await first.getByLabel("Test", { exact: true }).selectOption("prefix");
    await first.getByLabel("Path", { exact: true }).fill("/dash/admin");
    await savePolicies();
    t.equal(await through("/dash/items", plainKey), 200, "outside /dash/admin any key of the API");
    t.equal(await through("/dash/admin/users", plainKey), 403, "under /dash/admin the permission is asked for");
  });

  await step("a 400 names a field of one policy: its message stands beside that field, and nothing is saved", async () => {
    const first = policyGroup(1, "admins");
    await first.getByLabel("Test", { exact: true }).selectOption("regex");
    await first.getByLabel("Path", { exact: true }).fill("(");
    await policyForm.getByRole("status").filter({ hasText: "Unsaved changes." }).waitFor();
    await policyForm.getByRole("button", { name: "Save policies" }).click();
    const message = first.getByText(/is not a valid RE2 regular expression/);
    await message.waitFor();
    const describedBy = (await first.getByLabel("Path", { exact: true }).getAttribute("aria-describedby")) ?? "";
    t.equal(await message.getAttribute("id"), describedBy, "the message is the Path field's description");
    t.equal(await policyForm.getByText(/is not a valid RE2 regular expression/).count(), 1, "shown once, at that policy");
    await policyForm.getByRole("alert").filter({ hasText: "The policies were not saved" }).waitFor();
    t.equal(await through("/dash/admin/users", plainKey), 403, "the saved policies still apply");
    await first.getByLabel("Path", { exact: true }).fill("^/dash/admin");
    await policyForm.getByRole("button", { name: "Save policies" }).click();
    await policyForm.getByRole("status").filter({ hasText: "Policies saved." }).waitFor();
    await routeRow("dash-route").getByText("when path ~ ^/dash/admin").waitFor();
    await routeEditor.getByText("Edit as JSON").click();
    // The editor takes the saved policies when the route comes back from keygate, which may be after the click.
    const policiesJson = routeEditor.getByLabel("Policies (JSON)");
    const json = await waitFor("the JSON editor showing the saved policies", 20_000, async (because) => {
      const value = await policiesJson.inputValue();
      because(`it shows ${JSON.stringify(value.slice(0, 200))}`);
      return value.includes('"regex": "^/dash/admin"') ? value : undefined;
    });
    t.match(json, '"regex": "^/dash/admin"', "the JSON editor shows the policies");
  });

  await step("a cors policy from its form: keygate answers preflights, and refusals carry the CORS headers", async () => {
    await policyForm.getByLabel("Kind of policy").selectOption("cors");
    await policyForm.getByRole("button", { name: "Add policy" }).click();
    const cors = policyGroup(4, "cors");
    await cors.getByLabel("Allowed origins").fill("https://app.example.test\n~ (");
    await policyForm.getByRole("status").filter({ hasText: "Unsaved changes." }).waitFor();
    await policyForm.getByRole("button", { name: "Save policies" }).click();
    await cors.getByText(/is not a valid RE2 regular expression/).waitFor();
    await cors.getByLabel("Allowed origins").fill("https://app.example.test\n~ https://[a-z]+\\.preview\\.example\\.test");
    await cors.getByLabel("Max age (s)").fill("600");
    await cors.getByLabel("Allow credentials").check();
    await policyForm.getByRole("button", { name: "Save policies" }).click();
    await policyForm.getByRole("status").filter({ hasText: "Policies saved." }).waitFor();
    await routeRow("dash-route").getByText("cors (cors): CORS for https://app.example.test ~https://[a-z]+\\.preview").waitFor();
    const preflight = await fetch(`${origin}/dash/items`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example.test", "access-control-request-method": "GET" },
    });
    t.equal(preflight.status, 204, "the preflight is keygate's");
    t.equal(preflight.headers.get("access-control-max-age"), "600");
    const refused = await fetch(`${origin}/dash/items`, { headers: { origin: "https://pr.preview.example.test" } });
    t.equal(refused.status, 401, "no key");
    t.equal(refused.headers.get("access-control-allow-origin"), "https://pr.preview.example.test", "readable by the page");
    t.equal(refused.headers.get("access-control-allow-credentials"), "true");
  });

  await step("a configuration route is read-only; a route of the API is edited and deleted (with a confirmation)", async () => {
    const configured = routeRow("e2e-route");
    await configured.getByText("Read-only: from the configuration file").waitFor();
    t.equal(await configured.getByRole("button").count(), 0, "no edit controls");

    const edit = routeEditor.getByRole("form", { name: "Edit the route" });
    await edit.getByLabel("Timeout (ms)").fill("7000");
    await edit.getByRole("checkbox", { name: "GET", exact: true }).check();
    await edit.getByRole("button", { name: "Save route" }).click();
    await routeRow("dash-route").getByText("(timeout 7000 ms)").waitFor();
    t.match((await routeRow("dash-route").textContent()) ?? "", "GET /dash");
    t.equal(await through("/dash/items", plainKey), 200, "GET is still taken");
    t.equal(await through("/dash/items", plainKey, "POST"), 405, "POST no longer is: the path is taken for GET only");

    await page.getByRole("button", { name: "Delete dash-route" }).click();
    await page.getByRole("button", { name: "Confirm deleting dash-route" }).click();
    await routeRow("dash-route").waitFor({ state: "detached" });
    t.equal(await routeEditor.count(), 0, "its editor closed");
    t.equal(await through("/dash/items", plainKey), 404, "no route takes /dash any more");
  });

  await step("revoking a root key in the dashboard refuses it at once", async () => {
    await page.getByRole("link", { name: "Root keys" }).click();
    await page.getByRole("button", { name: "Revoke reader" }).click();
    await page.getByRole("button", { name: "Confirm revoking reader" }).click();
    await page.getByRole("cell", { name: /^revoked / }).waitFor();
    const refused = await fetch(`${origin}/v2/keygate.listApis`, {
      method: "POST",
      headers: { authorization: `Bearer ${reader}`, "content-type": "application/json" },
      body: "{}",
    });
    t.equal(refused.status, 401);
    await refused.arrayBuffer();
  });

  await step("signing out ends the session on the server", async () => {
    const [cookie] = await context.cookies();
    await signOut();
    const replay = await fetch(`${origin}/dashboard/api/session`, { headers: { cookie: `keygate_session=${cookie?.value}` } });
    t.equal(replay.status, 401, "the old cookie opens nothing");
    await replay.arrayBuffer();
    t.same(await context.cookies(), [], "the browser dropped the cookie");
  });
}

export type { Page };
