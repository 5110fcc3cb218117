import { useEffect, useState } from "preact/hooks";
import { WEBHOOK_EVENT_TYPES } from "../../../src/domain/webhooks/events.js";
import { call, type DataOf } from "../api.js";
import { ConfirmButton, DataTable, ErrorNote, Field, fieldError, formatTime, ShownOnce, TextField, useAction } from "../ui.js";

type Webhook = DataOf<"keygate.listWebhooks">[number];
type UsagePeriod = "hourly" | "daily";

/** The periods of the endpoint's usage reports (usage.reported, usage.corrected). */
function UsagePeriodField(props: { value: UsagePeriod; onValue: (period: UsagePeriod) => void }) {
  return (
    <Field label="Usage report period" hint="usage.reported: one report per customer and closed period (UTC)">
      {(id, describedBy) => (
        <select
          id={id}
          aria-describedby={describedBy}
          value={props.value}
          onChange={(event) => props.onValue(event.currentTarget.value as UsagePeriod)}
        >
          <option value="hourly">Hourly</option>
          <option value="daily">Daily</option>
        </select>
      )}
    </Field>
  );
}

/** Checkboxes for the event types, bound to a list. */
function EventChoice(props: { legend: string; value: string[]; onValue: (events: string[]) => void; error?: string | undefined }) {
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      <div class="checks">
        {WEBHOOK_EVENT_TYPES.map((type) => (
          <label key={type} class="check">
            <input
              type="checkbox"
              checked={props.value.includes(type)}
              onChange={(event) =>
                props.onValue(
                  (event.currentTarget as HTMLInputElement).checked ? [...props.value, type] : props.value.filter((t) => t !== type),
                )
              }
            />{" "}
            {type}
          </label>
        ))}
      </div>
      {props.error && <small class="error">{props.error}</small>}
    </fieldset>
  );
}

/** Webhook endpoints: create (the secret shown once), change events, enable or disable, rotate, test, deliveries. */
export function WebhooksPage() {
  const [webhooks, setWebhooks] = useState<DataOf<"keygate.listWebhooks"> | null>(null);
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const [usagePeriod, setUsagePeriod] = useState<UsagePeriod>("hourly");
  const [editing, setEditing] = useState<{ webhookId: string; events: string[]; usagePeriod: UsagePeriod } | null>(null);
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const [deliveries, setDeliveries] = useState<{ webhookId: string; items: DataOf<"keygate.listWebhookDeliveries"> } | null>(null);
  const { error, run } = useAction();
  const creation = useAction();

  const load = async () => setWebhooks(await call("keygate.listWebhooks", {}));
  useEffect(() => {
    run(load);
  }, []);

  const create = (event: Event) => {
    event.preventDefault();
    creation.run(async () => {
      const usage = events.some((type) => type.startsWith("usage."));
      const created = await call("keygate.createWebhook", { url, events, ...(usage ? { usagePeriod } : {}) });
      setShown({ label: "Signing secret", value: created.secret });
      setUrl("");
      setEvents([]);
      await load();
    });
  };
  const act = (work: () => Promise<unknown>) =>
    run(async () => {
      await work();
      await load();
    });
  const showDeliveries = (webhookId: string) =>
    run(async () => setDeliveries({ webhookId, items: await call("keygate.listWebhookDeliveries", { webhookId, limit: 50 }) }));

  return (
    <>
      <h1>Webhooks</h1>
      <ErrorNote error={error} />
      {shown && <ShownOnce label={shown.label} value={shown.value} onDismiss={() => setShown(null)} />}
      <form onSubmit={create} aria-label="Create a webhook">
        <h2>Create a webhook</h2>
        <TextField
          label="Endpoint URL"
          hint="http or https; events are signed as Standard Webhooks"
          value={url}
          onValue={setUrl}
          error={fieldError(creation.error, "body.url")}
        />
        <EventChoice legend="Events" value={events} onValue={setEvents} error={fieldError(creation.error, "body.events")} />
        <UsagePeriodField value={usagePeriod} onValue={setUsagePeriod} />
        <button type="submit">Create webhook</button>
        <ErrorNote error={creation.error} />
      </form>
      {editing && (
        <form
          aria-label="Edit events"
          onSubmit={(event) => {
            event.preventDefault();
            act(async () => {
              await call("keygate.updateWebhook", {
                webhookId: editing.webhookId,
                events: editing.events,
                usagePeriod: editing.usagePeriod,
              });
              setEditing(null);
            });
          }}
        >
          <EventChoice
            legend={`Events of ${editing.webhookId}`}
            value={editing.events}
            onValue={(next) => setEditing({ ...editing, events: next })}
          />
          <UsagePeriodField value={editing.usagePeriod} onValue={(next) => setEditing({ ...editing, usagePeriod: next })} />
          <button type="submit">Save events</button>{" "}
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </form>
      )}
      {webhooks && (
        <DataTable
          label="Webhooks"
          columns={["Id", "URL", "Events", "State", "Created", "Actions"]}
          empty="No webhooks yet: add an endpoint above to be told of key changes, low credits and rate limits exceeded."
          items={webhooks}
          row={(webhook: Webhook) => (
            <tr key={webhook.webhookId}>
              <td>
                <code>{webhook.webhookId}</code>
              </td>
              <td>{webhook.url}</td>
              <td>
                {webhook.events.join(", ")}
                {webhook.usagePeriod && <small> (usage {webhook.usagePeriod})</small>}
              </td>
              <td>
                {webhook.enabled ? "enabled" : "disabled"}
                {webhook.disabledReason && <small> ({webhook.disabledReason})</small>}
                {webhook.failingSince !== undefined && <small> failing since {formatTime(webhook.failingSince)}</small>}
              </td>
              <td>{formatTime(webhook.createdAt)}</td>
              <td>
                <button
                  type="button"
                  onClick={() =>
                    setEditing({
                      webhookId: webhook.webhookId,
                      events: [...webhook.events],
                      usagePeriod: (webhook.usagePeriod as UsagePeriod | undefined) ?? "hourly",
                    })
                  }
                >
                  Edit events
                </button>{" "}
                <button
                  type="button"
                  onClick={() => act(() => call("keygate.updateWebhook", { webhookId: webhook.webhookId, enabled: !webhook.enabled }))}
                >
                  {webhook.enabled ? "Disable" : "Enable"}
                </button>{" "}
                <ConfirmButton
                  label="Rotate secret"
                  title={`Rotate the signing secret of ${webhook.url}?`}
                  consequence={
                    <p>
                      A new secret is made and shown once. For a day, deliveries are signed with both secrets; after that a receiver that
                      still checks the old secret refuses them.
                    </p>
                  }
                  confirm="Rotate the secret"
                  onConfirm={() =>
                    act(async () => {
                      const rotated = await call("keygate.rotateWebhookSecret", { webhookId: webhook.webhookId });
                      setShown({ label: "New signing secret", value: rotated.secret });
                    })
                  }
                />{" "}
                <button type="button" onClick={() => act(() => call("keygate.testWebhook", { webhookId: webhook.webhookId }))}>
                  Send test
                </button>{" "}
                <button type="button" onClick={() => showDeliveries(webhook.webhookId)}>
                  Deliveries
                </button>{" "}
                <ConfirmButton
                  label="Delete"
                  name={`Delete ${webhook.webhookId}`}
                  title={`Delete the webhook to ${webhook.url}?`}
                  consequence={<p>No more events are sent there, and the deliveries not yet made are dropped. This cannot be undone.</p>}
                  confirm={`Confirm deleting ${webhook.webhookId}`}
                  onConfirm={() => act(() => call("keygate.deleteWebhook", { webhookId: webhook.webhookId }))}
                />
              </td>
            </tr>
          )}
        />
      )}
      {deliveries && (
        <DataTable
          label={`Deliveries of ${deliveries.webhookId}`}
          columns={["Delivery", "Type", "Status", "Attempts", "Response", "Last error", "Created"]}
          empty="No deliveries yet: Send test queues one."
          items={deliveries.items}
          row={(delivery) => (
            <tr key={delivery.deliveryId}>
              <td>
                <code>{delivery.deliveryId}</code>
              </td>
              <td>{delivery.type}</td>
              <td>{delivery.status}</td>
              <td>{delivery.attempts}</td>
              <td>{delivery.responseCode ?? ""}</td>
              <td>{delivery.lastError ?? ""}</td>
              <td>{formatTime(delivery.createdAt)}</td>
            </tr>
          )}
        />
      )}
    </>
  );
}
