import type { AddressInfo } from "node:net";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import { waitFor } from "../helpers/wait.js";
import { launchBrowser } from "./dashboard-flows.js";

// The customer portal in a real browser: an operator creates the portal in the dashboard; a session URL opened in a fresh context lands on the customer's keys; the
// customer names and creates a key, which verifies; rerolls it after a confirmation (both valid through the old one's
// hour of grace); sees the
// verifications on the usage chart; a reused or unknown URL shows a clear page.

t.setTimeout(240_000);

t.test("the customer portal in Chromium", async (t) => {
  const h = await harness(t, { config: { analytics: { engine: "embedded", path: analyticsDir(t), buffer: { flushIntervalMs: 50 } } } });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const apiId = (await h.call("apis.createApi", { name: "portal-e2e" })).body.data.apiId;
  const browser = await launchBrowser(t);

  // The operator creates the portal in the dashboard's Portals page and makes a preview link there.
  const operator = await (await browser.newContext()).newPage();
  await operator.goto(`${origin}/dashboard`);
  await operator.getByLabel("Root key").fill(ROOT_KEY);
  await operator.getByRole("button", { name: "Sign in" }).click();
  await operator.getByRole("heading", { name: "APIs" }).waitFor();
  await operator.getByRole("link", { name: "Portals" }).click();
  await operator.getByRole("heading", { name: "Create a portal" }).waitFor();
  await operator.getByLabel("Portal slug").fill("acme");
  await operator.getByLabel("Portal name").fill("Acme API");
  await operator.getByLabel("Portal API").selectOption(apiId);
  await operator.getByLabel("Portal colour").fill("#0f766e");
  await operator.getByLabel("Prefix of customers' new keys").fill("acme");
  await operator.getByRole("button", { name: "Create portal" }).click();
  await operator.getByRole("button", { name: "Edit acme" }).waitFor();
  const stored = (await h.call("portal.getPortal", { portal: "acme" })).body.data;
  t.match(stored, {
    displayName: "Acme API",
    mapping: { type: "keyspace", id: apiId },
    primaryColor: "#0f766e",
    keyDefaults: { prefix: "acme" },
  });
  await operator.getByLabel("Preview portal (slug)").fill("acme");
  await operator.getByLabel("Customer's externalId").fill("preview_user");
  await operator.getByRole("button", { name: "Make a preview link" }).click();
  t.match(await operator.getByTestId("preview-link").getAttribute("href"), /\/portal\/acme\?code=pst_/, "a preview link");

  // Minted through the listening server, so that the URL names its origin.
  const minted = await fetch(`${origin}/v2/portal.createSession`, {
    method: "POST",
    headers: { authorization: "Bearer root_test_everything_allowed", "content-type": "application/json" },
    body: JSON.stringify({
      portal: "acme",
      externalId: "customer_1",
      scopes: ["keys:read", "keys:create", "keys:reroll", "analytics:read"],
      returnUrl: "https://app.example.com/settings",
    }),
  });
  const url = ((await minted.json()) as { data: { url: string } }).data.url;
  t.ok(url.startsWith(`${origin}/portal/acme?code=pst_`), url);

  const context = await browser.newContext();
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  await page.goto(url);
  await page.getByRole("heading", { name: "Your API keys" }).waitFor();
  t.equal(new URL(page.url()).search, "", "the code is taken out of the address bar");
  t.equal(await page.getByRole("heading", { name: "Acme API" }).count(), 1, "the portal's name");
  t.equal(await page.getByTestId("return-link").getAttribute("href"), "https://app.example.com/settings");
  const cookies = await context.cookies();
  const cookie = cookies.find((c) => c.name === "portal_session");
  t.ok(cookie?.httpOnly, "httpOnly session cookie");
  t.equal(cookie?.sameSite, "Strict");
  t.equal(cookie?.path, "/portal/acme");

  await page.getByLabel("Name of the new key").fill("first key");
  await page.getByTestId("create-key").click();
  const created = await page.getByTestId("new-key-value").textContent();
  t.match(created, /^acme_/);
  const verify = async (key: string | null) => (await h.call("keys.verifyKey", { key })).body.data;
  t.equal((await verify(created)).valid, true, "the created key verifies");
  t.equal((await verify(created)).valid, true);
  await page.getByRole("button", { name: "Done" }).click();
  const listed = page.getByTestId("keys").locator("[data-key-id]");
  await listed.first().waitFor();
  t.equal(await listed.count(), 1, "the new key is listed");
  t.match(await listed.first().textContent(), /first key/, "by the name it was given");

  await page.getByRole("button", { name: "Reroll first key" }).click();
  const dialog = page.getByRole("dialog", { name: /^Reroll the key first key/ });
  t.equal(await dialog.getByLabel("This key keeps working for").inputValue(), "3600000", "the old key keeps working an hour unless told");
  await dialog.getByRole("button", { name: "Reroll the key" }).click();
  await page.getByTestId("new-key-value").waitFor();
  const rerolled = await page.getByTestId("new-key-value").textContent();
  t.not(rerolled, created);
  t.equal((await verify(created)).valid, true, "the old key works on through its hour");
  t.equal((await verify(rerolled)).valid, true, "the new key is valid");

  // Four verifications so far, all valid: the chart shows them once written.
  await waitFor("the usage chart counts the four verifications", 30_000, async (because) => {
    await page.getByTestId("refresh-usage").click();
    await page.waitForTimeout(100);
    const shown = await page.getByTestId("usage-total").textContent();
    because(`the chart shows ${shown}`);
    return shown === "4" ? true : undefined;
  });
  t.equal(await page.getByTestId("usage-valid").textContent(), "4");
  await page.locator(".usage .uplot canvas").waitFor();
  t.ok(await page.locator(".usage .u-legend").getByText("valid", { exact: true }).count(), "the chart's legend names its lines");

  const reused = await (await browser.newContext()).newPage();
  await reused.goto(url);
  await reused.getByTestId("portal-error").waitFor();
  t.match(await reused.getByTestId("portal-error").textContent(), /already been used/);
  const unknown = await (await browser.newContext()).newPage();
  await unknown.goto(`${origin}/portal/acme?code=pst_expired_or_never_issued`);
  t.match(await unknown.getByTestId("portal-error").textContent(), /unknown or has expired/);
  t.same(
    errors.filter((e) => !/401|Failed to load resource/.test(e)),
    [],
    "no script errors, no CSP violations",
  );
});
