import type { AddressInfo } from "node:net";
import type { Locator, Page } from "playwright-core";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { harness } from "../helpers/harness.js";
import { startUpstream } from "../helpers/upstream.js";
import { waitFor } from "../helpers/wait.js";
import { launchBrowser } from "./dashboard-flows.js";
import { signIn } from "./page-checks.js";

// What a newcomer tripped on in the first hour, each in Chromium: a portal key that the API's route
// refused, a reroll that killed a key on one click, a key shown out of sight, controls out of line, header fields
// that read as values, an API picked without being shown, checkboxes apart from their words, audit changes as one
// blob, destructive buttons without a word of warning, a portal that listed 100 keys at most, usage without axes.

t.setTimeout(600_000);

const ORDERS = "api_first_orders";
const BILLING = "api_first_billing";

/** Whether `inner`'s box lies within the window. */
async function inView(page: Page, inner: Locator): Promise<boolean> {
  const box = await inner.boundingBox();
  const size = page.viewportSize();
  return box !== null && size !== null && box.y >= 0 && box.y + box.height <= size.height;
}

t.test("the first hour of a newcomer, in Chromium", async (t) => {
  const upstream = await startUpstream(t);
  const h = await harness(t, {
    config: {
      analytics: { engine: "embedded", path: analyticsDir(t), buffer: { flushIntervalMs: 50 } },
      apis: [
        { id: ORDERS, name: "orders", workspaceId: "ws_test" },
        { id: BILLING, name: "billing", workspaceId: "ws_test" },
      ],
      routes: [{ name: "orders", match: { prefix: "/orders" }, upstream: upstream.url, apiId: ORDERS, permissions: "orders.read" }],
    },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const ok = async (procedure: string, body: unknown) => {
    const answer = await h.call(procedure, body);
    if (answer.status !== 200) throw new Error(`${procedure}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.data;
  };
  const through = async (key: string) => {
    const answer = await fetch(`${origin}/orders/1`, { headers: { authorization: `Bearer ${key}` } });
    await answer.arrayBuffer();
    return answer.status;
  };
  const browser = await launchBrowser(t);
  const operator = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  await signIn(operator, origin);

  await t.test("the portal's API is chosen, not assumed; a customer's key gets the defaults the route asks for", async (t) => {
    await operator.getByRole("link", { name: "Portals" }).click();
    const form = operator.getByRole("form", { name: "Create a portal" });
    await form.getByLabel("Portal slug").fill("acme");
    await form.getByLabel("Portal name").fill("Acme API");
    const api = form.getByLabel("Portal API");
    t.equal(await api.inputValue(), "", "with two APIs, none is chosen");
    t.equal(await api.locator("option:checked").textContent(), "Choose an API…", "and the field says so");
    await form.getByRole("button", { name: "Create portal" }).click();
    t.notOk(await api.evaluate((element) => (element as unknown as { checkValidity(): boolean }).checkValidity()), "the field is invalid");
    t.same((await ok("portal.listPortals", {})).portals, [], "nothing was created");

    await api.selectOption(ORDERS);
    await form.getByLabel("Permissions of customers' new keys").fill("orders.read");
    await form.getByRole("button", { name: "Add a rate limit" }).click();
    await form.getByLabel("Requests").fill("100");
    await form.getByLabel("Remaining credits").fill("50");
    await form.getByRole("button", { name: "Create portal" }).click();
    const row = operator.getByRole("table", { name: "Portals" }).getByRole("row").filter({ hasText: "acme" });
    await row.waitFor();
    t.match(await row.textContent(), "permissions orders.read; requests: 100 per 60000 ms; 50 credits", "the table says what new keys get");
    t.match((await ok("portal.getPortal", { portal: "acme" })).keyDefaults, {
      permissions: ["orders.read"],
      ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: true }],
      credits: { remaining: 50 },
    });

    const { url } = await ok("portal.createSession", { portal: "acme", externalId: "customer_1", scopes: ["keys:read", "keys:create"] });
    const customer = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    await customer.goto(url.replace(/^http:\/\/[^/]+/, origin));
    await customer.getByLabel("Name of the new key").fill("production");
    await customer.getByTestId("create-key").click();
    const key = (await customer.getByTestId("new-key-value").textContent()) ?? "";
    t.equal(await through(key), 200, "the customer's own key passes the route it is for");
    t.match(await ok("keys.verifyKey", { key }), { valid: true, credits: 48, permissions: ["orders.read"] });
  });

  await t.test("the key shown once is in view, and focused, wherever the button was", async (t) => {
    await operator.getByRole("link", { name: "APIs", exact: true }).click();
    await operator.getByRole("link", { name: "orders" }).click();
    await operator.getByText("Create a key").click();
    const form = operator.getByRole("form", { name: "Create a key" });
    await form.getByLabel("Name", { exact: true }).fill("scrolled");
    await form.getByRole("button", { name: "Create key" }).scrollIntoViewIfNeeded();
    t.ok(((await operator.evaluate("window.scrollY")) as number) > 300, "the form is long: the page is scrolled down to its button");
    await form.getByRole("button", { name: "Create key" }).click();
    const shown = operator.getByRole("region", { name: "New key" });
    await shown.waitFor();
    await waitFor("the new key scrolled into view", 5_000, async () => ((await inView(operator, shown)) ? true : undefined));
    t.equal(await operator.evaluate("document.activeElement.getAttribute('aria-label')"), "New key", "it has the focus");
    await shown.getByRole("button", { name: "Done" }).click();
  });

  await t.test("a filter's button stands level with its fields", async (t) => {
    await operator.getByRole("link", { name: "Audit log" }).click();
    const form = operator.getByRole("form", { name: "Filter the audit log" });
    // The button ends the last row of fields: level with the field beside it.
    const input = await form.getByLabel("To (UTC)").boundingBox();
    const button = await form.getByRole("button", { name: "Filter" }).boundingBox();
    t.ok(input && button, "both are drawn");
    if (input && button) {
      t.ok(Math.abs(input.y - button.y) <= 1, `tops level (${input.y} and ${button.y})`);
      t.ok(Math.abs(input.height - button.height) <= 1, `one height (${input.height} and ${button.height})`);
    }
  });

  await t.test("a route's forwarded headers are asked for by name", async (t) => {
    await operator.getByRole("link", { name: "Gateway" }).click();
    await operator.getByText("Create a route").click();
    const form = operator.getByRole("form", { name: "Create a route" });
    const headers = form.getByRole("group", { name: "Headers keygate adds for the upstream: their names" });
    const keyId = headers.getByLabel("Header name for the key id");
    t.equal(await keyId.getAttribute("placeholder"), "x-keygate-key-id", "an example of a header name");
    for (const carries of ["the principal (the verified key as JSON)", "the identity id", "the external id"])
      t.equal(await headers.getByLabel(`Header name for ${carries}`).count(), 1, carries);
  });

  await t.test("a webhook's event checkboxes stay beside their words, on a phone too", async (t) => {
    for (const width of [1280, 390]) {
      await operator.setViewportSize({ width, height: 800 });
      await operator.goto(`${origin}/dashboard/#/webhooks`);
      const form = operator.getByRole("form", { name: "Create a webhook" });
      const labels = form.locator("label.check");
      await labels.first().waitFor();
      for (let index = 0; index < (await labels.count()); index++) {
        const label = labels.nth(index);
        const box = await label.locator("input").boundingBox();
        const whole = await label.boundingBox();
        t.ok(
          box && whole && box.y >= whole.y - 1 && box.y + box.height <= whole.y + whole.height + 1 && whole.height < 40,
          `${await label.textContent()} at ${width} px: one line`,
        );
      }
    }
    await operator.setViewportSize({ width: 1280, height: 800 });
  });

  await t.test("a destructive action asks first, naming what is lost; Cancel (and Enter) keep everything", async (t) => {
    const { apiId } = await ok("apis.createApi", { name: "doomed" });
    await operator.goto(`${origin}/dashboard/#/apis`);
    await operator.getByRole("button", { name: "Delete doomed" }).click();
    const dialog = operator.getByRole("dialog", { name: "Delete the API doomed?" });
    t.match(await dialog.textContent(), "Every key of doomed stops verifying at once", "it says what is lost");
    await operator.keyboard.press("Enter");
    await dialog.waitFor({ state: "detached" });
    t.equal((await h.call("apis.getApi", { apiId })).status, 200, "Enter pressed Cancel, which has the focus");
    await operator.getByRole("button", { name: "Delete doomed" }).click();
    await dialog.getByRole("button", { name: "Cancel" }).click();
    t.equal((await h.call("apis.getApi", { apiId })).status, 200, "Cancel keeps it");
    await operator.getByRole("button", { name: "Delete doomed" }).click();
    await dialog.getByRole("button", { name: "Confirm deleting doomed" }).click();
    await operator.getByRole("link", { name: "doomed" }).waitFor({ state: "detached" });
    t.equal((await h.call("apis.getApi", { apiId })).status, 404, "confirmed, it is deleted");
  });

  await t.test("a policy change in the audit log is a diff, field by field, collapsed until opened", async (t) => {
    const route = await ok("keygate.createRoute", { name: "audited", match: { prefix: "/audited" }, upstream: upstream.url });
    await ok("keygate.updateRoute", {
      route: route.id,
      policies: [{ name: "api keys", enabled: true, keyauth: { keyspaces: [ORDERS], permissionQuery: "orders.read" } }],
    });
    await operator.goto(`${origin}/dashboard/#/audit-log/route/${route.id}`);
    const entry = operator.getByRole("table", { name: "Audit log entries" }).getByRole("row").filter({ hasText: "route.update" });
    await entry.waitFor();
    const change = entry.getByRole("group").filter({ hasText: "policies" });
    t.match(await change.locator("summary").textContent(), /^policies: (changed|set) \(\d+ lines? removed, [1-9]\d* added\)$/);
    t.notOk(await change.locator("pre.diff").isVisible(), "collapsed");
    await change.locator("summary").click();
    // biome-ignore lint/performance/useDomNodeTextContent: the lines as rendered, which textContent runs together
    const lines = (await change.locator("pre.diff").innerText()).split("\n");
    t.ok(
      lines.some((line) => /^\+ {5}"name": "api keys",?$/.test(line)),
      "the added policy, pretty-printed, a line each",
    );
    t.ok(
      lines.some((line) => /^\+ {7}"permissionQuery": "orders.read"/.test(line) || /"permissionQuery": "orders.read"/.test(line)),
      "to its depth",
    );
  });

  await t.test("the portal: more than 100 keys by pages; a reroll asks first and keeps the old key an hour; usage by key", async (t) => {
    for (let i = 0; i < 120; i++) await ok("keys.createKey", { apiId: ORDERS, externalId: "customer_many", name: `key ${i}` });
    const { url } = await ok("portal.createSession", {
      portal: "acme",
      externalId: "customer_many",
      scopes: ["keys:read", "keys:create", "keys:reroll", "analytics:read"],
    });
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(url.replace(/^http:\/\/[^/]+/, origin));
    const rows = page.getByTestId("keys").locator("[data-key-id]");
    const pager = page.getByRole("navigation", { name: "Pages of keys" });
    const rowsBecome = (count: number) =>
      waitFor(`${count} keys listed`, 10_000, async (because) => {
        const shown = await rows.count();
        because(`${shown} listed`);
        return shown === count ? true : undefined;
      });
    await rowsBecome(50);
    t.ok(await pager.getByRole("button", { name: "Previous page" }).isDisabled());
    await pager.getByRole("button", { name: "Next page" }).click();
    await pager.getByText("Page 2").waitFor();
    await rowsBecome(50);
    await pager.getByRole("button", { name: "Next page" }).click();
    await pager.getByText("Page 3").waitFor();
    await rowsBecome(20);
    t.ok(await pager.getByRole("button", { name: "Next page" }).isDisabled(), "the last page");
    await pager.getByRole("button", { name: "Previous page" }).click();
    await pager.getByText("Page 2").waitFor();
    await rowsBecome(50);

    // The new key is shown in view even when the button was scrolled to the top of the window (a customer of a few
    // keys from here on, so that they are on the first page).
    const session = await ok("portal.createSession", {
      portal: "acme",
      externalId: "customer_rotating",
      scopes: ["keys:read", "keys:create", "keys:reroll", "analytics:read"],
    });
    await ok("keys.createKey", { apiId: ORDERS, externalId: "customer_rotating", name: "older key" });
    await page.goto(session.url.replace(/^http:\/\/[^/]+/, origin));
    await rows.first().waitFor();
    await page.getByLabel("Name of the new key").fill("rotating");
    await page.evaluate("window.scrollBy(0, document.querySelector('[data-testid=create-key]').getBoundingClientRect().top - 5)");
    await page.getByTestId("create-key").click();
    const shown = page.getByTestId("new-key");
    await shown.waitFor();
    await waitFor("the new key in view", 5_000, async () => ((await inView(page, shown)) ? true : undefined));
    const rotating = (await page.getByTestId("new-key-value").textContent()) ?? "";
    await shown.getByRole("button", { name: "Done" }).click();

    await page.goto(session.url.replace(/^http:\/\/[^/]+/, origin).replace(/\?.*$/, ""));
    const reroll = page.getByRole("button", { name: "Reroll rotating" });
    await reroll.click();
    const dialog = page.getByRole("dialog", { name: /^Reroll the key rotating/ });
    t.match(await dialog.textContent(), "This key keeps working for the time you choose here, then stops");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    t.equal(await page.getByTestId("new-key").count(), 0, "cancelled: no new key");
    const untouched = await ok("keys.verifyKey", { key: rotating });
    t.match(untouched, { valid: true }, "and the key untouched");
    await reroll.click();
    await dialog.getByRole("button", { name: "Reroll the key" }).click();
    const successor = (await page.getByTestId("new-key-value").textContent()) ?? "";
    t.match(await ok("keys.verifyKey", { key: rotating }), { valid: true }, "the old key works on, for its hour");
    const fresh = await ok("keys.verifyKey", { key: successor });
    t.match(fresh, { valid: true });
    t.equal(await through(successor), 200);
    const named = page.getByTestId("keys").locator("[data-key-id]").filter({ hasText: "rotating" });
    await waitFor("both keys listed", 10_000, async () => ((await named.count()) === 2 ? true : undefined));
    const states = (await named.getByTestId("key-state").allTextContents()).sort();
    t.equal(states[0], "active", "the new key is active");
    t.match(states[1], /^stops /, "the old one says when it stops: the two are told apart");

    // Usage: four verifications of the old key, three of the new (one through the gateway), by key and over time.
    for (let i = 0; i < 2; i++) await ok("keys.verifyKey", { key: rotating });
    await ok("keys.verifyKey", { key: successor });
    const byKey = page.getByTestId("usage-by-key");
    await waitFor("usage counted per key", 30_000, async (because) => {
      await page.getByTestId("refresh-usage").click();
      await page.waitForLoadState("networkidle");
      // biome-ignore lint/performance/useDomNodeTextContent: the lines as rendered, which textContent runs together
      const text = (await byKey.locator("tbody").innerText()).replace(/\s+/g, " ");
      because(text);
      return (await page.getByTestId("usage-total").textContent()) === "7" ? true : undefined;
    });
    const cells = async (keyId: string) => (await byKey.locator(`[data-key-id="${keyId}"]`).getByRole("cell").allTextContents()).slice(1);
    t.same(await cells(untouched.keyId), ["rotating", "4", "4", "0"], "the old key: 4 verifications");
    t.same(await cells(fresh.keyId), ["rotating", "3", "3", "0"], "the new key: 3 (one through the gateway)");
    const chart = page.locator(".usage .uplot");
    t.equal(await chart.locator(".u-axis").count(), 2, "a time axis and a count axis");
    t.same(
      (await chart.locator(".u-legend .u-series .u-label").allTextContents()).slice(1),
      ["valid", "rate limited", "out of credits", "other refusals"],
      "a legend naming each line",
    );
  });
});
