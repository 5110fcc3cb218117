import t from "tap";
import { analyticsDir } from "../helpers/analytics.js";
import { harness } from "../helpers/harness.js";
import { signedInDashboard } from "./dashboard-flows.js";

t.setTimeout(300_000);

t.test("the dashboard in Chromium shows an identity's and a key's usage from keygate.getUsage", async (t) => {
  const h = await harness(t, {
    config: {
      apis: [{ id: "api_dashboard_usage", name: "metered", workspaceId: "ws_test" }],
      analytics: { engine: "embedded", path: analyticsDir(t) },
      webhooks: { deliver: false },
    },
  });
  // acme's keys share a balance of 3: four verifications are three paid by the identity and one refused.
  await h.call("identities.createIdentity", { externalId: "acme", credits: { remaining: 3 } });
  // The UTC day the verifications fall in (taken before them: the page may be read after midnight).
  const day = new Date().toISOString().slice(0, 10);
  const shared = (await h.call("keys.createKey", { apiId: "api_dashboard_usage", externalId: "acme" })).body.data;
  const own = (await h.call("keys.createKey", { apiId: "api_dashboard_usage", externalId: "acme", credits: { remaining: 5 } })).body.data;
  for (let n = 0; n < 4; n++) await h.call("keys.verifyKey", { key: shared.key });
  for (let n = 0; n < 2; n++) await h.call("keys.verifyKey", { key: own.key });
  await h.app.analytics.flush();

  const page = await signedInDashboard(t, h);

  await page.getByRole("link", { name: "Identities" }).click();
  await page.getByRole("button", { name: "Edit acme" }).click();
  const usage = page.getByRole("region", { name: "Usage of acme" });
  const cells = async (table: string, row: string) =>
    usage
      .getByRole("table", { name: table })
      .getByRole("row", { name: new RegExp(`^${row}`) })
      .getByRole("cell")
      .allTextContents();
  await usage.getByRole("table", { name: "Usage of acme by day" }).waitFor();
  // Requests, valid, rate limited, usage exceeded, credits (key), credits (identity).
  t.same(await cells("Usage of acme by day", "Total"), ["6", "5", "0", "1", "2", "3"], "the identity's totals, by paying balance");
  t.same(await cells("Usage of acme by day", day), ["6", "5", "0", "1", "2", "3"], "all of it on the day the verifications were made");

  await usage.getByLabel("Usage period").selectOption("hourly");
  await usage.getByRole("table", { name: "Usage of acme by hour" }).waitFor();
  t.same(await cells("Usage of acme by hour", "Total"), ["6", "5", "0", "1", "2", "3"], "the same by hour");

  await page.getByRole("link", { name: "APIs" }).click();
  await page.getByRole("link", { name: "metered" }).click();
  await page.getByRole("button", { name: `Edit ${own.keyId}` }).click();
  const keyUsage = page.getByRole("region", { name: `Usage of key ${own.keyId}` });
  await keyUsage.getByRole("table", { name: `Usage of key ${own.keyId} by day` }).waitFor();
  t.same(
    await keyUsage
      .getByRole("table")
      .getByRole("row", { name: /^Total/ })
      .getByRole("cell")
      .allTextContents(),
    ["2", "2", "0", "0", "2", "0"],
    "a key's page shows the key's own usage",
  );
});
