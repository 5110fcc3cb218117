import t from "tap";
import { harness } from "../helpers/harness.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver, verifySignature } from "../helpers/webhook-receiver.js";
import { signedInDashboard } from "./dashboard-flows.js";

t.setTimeout(300_000);

t.test("the Webhooks page in Chromium: create (secret shown once), test, deliveries, events, disable, rotate, delete", async (t) => {
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const h = await harness(t, { config: { webhooks: { allowPrivateAddresses: true, pollIntervalMs: 20 } } });
  const page = await signedInDashboard(t, h);
  await page.getByRole("link", { name: "Webhooks" }).click();
  await page.getByRole("heading", { name: "Webhooks" }).waitFor();

  const form = page.getByRole("form", { name: "Create a webhook" });
  await form.getByLabel("Endpoint URL").fill(receiver.url);
  await form.getByRole("button", { name: "Create webhook" }).click();
  await form
    .getByText(/body.events|at least 1/)
    .first()
    .waitFor();
  await form.getByRole("checkbox", { name: "key.created" }).check();
  await form.getByRole("button", { name: "Create webhook" }).click();
  const shown = page.getByRole("region", { name: "Signing secret" });
  await shown.getByRole("button", { name: "Copy" }).waitFor();
  const secret = (await shown.getByLabel("Signing secret").textContent()) ?? "";
  t.match(secret, /^whsec_/, "the secret, shown once");
  await shown.getByRole("button", { name: "Done" }).click();
  t.equal(await page.getByText(secret).count(), 0, "and gone once dismissed");
  const row = page.getByRole("row").filter({ hasText: receiver.url });
  await row.getByText("enabled").waitFor();

  await row.getByRole("button", { name: "Send test" }).click();
  const [received] = await waitFor("the test event", 10_000, () => (receiver.received.length > 0 ? receiver.received : undefined));
  t.equal(received?.event.type, "webhook.test");
  t.ok(received && verifySignature(secret, received.headers, received.body), "signed with the secret the page showed");
  await waitFor("delivered", 10_000, async () => {
    await row.getByRole("button", { name: "Deliveries" }).click();
    return (await page
      .getByRole("table", { name: /^Deliveries of / })
      .getByRole("cell", { name: "delivered" })
      .count()) > 0
      ? true
      : undefined;
  });

  await row.getByRole("button", { name: "Edit events" }).click();
  const edit = page.getByRole("form", { name: "Edit events" });
  await edit.getByRole("checkbox", { name: "ratelimit.exceeded" }).check();
  await edit.getByRole("button", { name: "Save events" }).click();
  await row.getByText("key.created, ratelimit.exceeded").waitFor();
  // Usage reports need analytics, which this keygate has off: the form says so, and the events stay.
  await row.getByRole("button", { name: "Edit events" }).click();
  await edit.getByRole("checkbox", { name: "usage.reported" }).check();
  await edit.getByLabel("Usage report period").selectOption("daily");
  await edit.getByRole("button", { name: "Save events" }).click();
  await page
    .getByRole("alert")
    .getByText(/usage\.reported and usage\.corrected are made from analytics/)
    .waitFor();
  await edit.getByRole("button", { name: "Cancel" }).click();

  await row.getByRole("button", { name: "Disable" }).click();
  await row.getByText("disabled").waitFor();
  await row.getByRole("button", { name: "Rotate secret" }).click();
  await page
    .getByRole("dialog", { name: /^Rotate the signing secret/ })
    .getByRole("button", { name: "Rotate the secret" })
    .click();
  const rotated = (await page.getByRole("region", { name: "New signing secret" }).getByLabel("New signing secret").textContent()) ?? "";
  t.match(rotated, /^whsec_/);
  t.not(rotated, secret);
  await page.getByRole("button", { name: /^Delete wh_/ }).click();
  await page.getByRole("button", { name: /^Confirm deleting wh_/ }).click();
  await row.waitFor({ state: "detached" });
  t.same((await h.call("keygate.listWebhooks", {})).body.data, [], "deleted");
});
