import type { AddressInfo } from "node:net";
import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { harness, ROOT_KEY } from "../helpers/harness.js";
import { launchBrowser } from "./dashboard-flows.js";

t.setTimeout(300_000);

/**
 * The audit log page in Chromium: a key edited through the dashboard, then its history opened from the key's page
 * shows each change with its old and new value, newest first, by the dashboard session's root key; the page's
 * filters narrow the workspace's log.
 */
t.test("a key's history in the dashboard after edits made there", async (t) => {
  const h = await harness(t, {
    config: { analytics: { engine: "embedded", path: analyticsDir(t), buffer: { flushIntervalMs: 600_000 } } },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const origin = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  const apiId = (await h.call("apis.createApi", { name: "audited" })).body.data.apiId as string;
  const keyId = (await h.call("keys.createKey", { apiId, name: "before" })).body.data.keyId as string;

  const browser = await launchBrowser(t);
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(`${origin}/dashboard/`);
  await page.getByLabel("Root key").fill(ROOT_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "audited" }).click();

  await page.getByRole("button", { name: `Edit ${keyId}` }).click();
  const form = page.getByRole("form", { name: "Edit the key" });
  await form.getByLabel("Name", { exact: true }).fill("after");
  await form.getByRole("button", { name: "Save key" }).click();
  await form.waitFor({ state: "detached" });
  await page.getByRole("button", { name: `Edit ${keyId}` }).click();
  await form.getByLabel("Remaining credits").fill("7");
  await form.getByRole("button", { name: "Save key" }).click();
  await form.waitFor({ state: "detached" });

  await page.getByRole("button", { name: `Edit ${keyId}` }).click();
  await page.getByRole("link", { name: "History of this key" }).click();
  await page.getByRole("heading", { name: `History of key ${keyId}` }).waitFor();
  const table = page.getByRole("table", { name: "Audit log entries" });
  const rows = table.getByRole("row");
  await rows.nth(3).waitFor();
  t.equal(await rows.count(), 4, "a header and three entries: two edits and the creation");
  t.match(await rows.nth(1).textContent(), /key\.update.*credits: set \(0 lines removed, 3 added\)/, "the newest first: the credits");
  await rows.nth(1).getByText("credits").click();
  // biome-ignore lint/performance/useDomNodeTextContent: the lines as rendered, which textContent runs together
  t.equal(await rows.nth(1).locator("pre.diff").innerText(), '+ {\n+   "remaining": 7\n+ }', "opened: the new value as JSON, line by line");
  t.match(await rows.nth(1).textContent(), /dashboard config_root_key_0/, "by the dashboard session's root key");
  t.match(await rows.nth(2).textContent(), /key\.update.*name: before → after/);
  t.match(await rows.nth(3).textContent(), /root_key config_root_key_0.*key\.create.*name: — → before/, "the creation, through /v2");

  await page.getByRole("link", { name: "Audit log" }).click();
  await page.getByRole("heading", { name: "Audit log", exact: true }).waitFor();
  await page.getByLabel("Action").fill("api.create");
  await page.getByRole("button", { name: "Filter" }).click();
  await table
    .getByText(/^Created key/)
    .first()
    .waitFor({ state: "detached" });
  await table.getByRole("cell", { name: /^Created API/ }).waitFor();
  t.equal(await rows.count(), 2, "the filter keeps the API's creation only");
});
