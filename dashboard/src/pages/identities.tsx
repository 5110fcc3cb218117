import { useEffect, useState } from "preact/hooks";
import { ApiError, call, callPage, type DataOf } from "../api.js";
import { ConfirmButton, DataTable, ErrorNote, FormError, fieldError, Pager, TextField, useAction, useCursorPages } from "../ui.js";
import { type LimitDraft, limitsBody, RateLimitsEditor } from "./key-form.js";
import { UsagePanel } from "./usage.js";

function parseMeta(text: string): Record<string, unknown> | undefined {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_input", "Meta is not valid JSON.", [{ location: "body.meta", message: "must be a JSON object" }]);
  }
}

/** The balance an identity's keys share (keygate's identity credits), with its refill and low threshold. */
function creditsText(credits: DataOf<"identities.listIdentities">[number]["credits"]): string {
  if (!credits || credits.remaining === null) return "none";
  const refill = credits.refill ? `, refills to ${credits.refill.amount} ${credits.refill.interval}` : "";
  const low = credits.lowThreshold === undefined ? "" : `, low at ${credits.lowThreshold}`;
  return `${credits.remaining}${refill}${low}`;
}

/** Identities: list (search, pages), create, edit meta and rate limits, delete; each one's shared credits and usage shown. */
export function IdentitiesPage() {
  const [identities, setIdentities] = useState<DataOf<"identities.listIdentities">>([]);
  const pages = useCursorPages();
  const [search, setSearch] = useState("");
  const [externalId, setExternalId] = useState("");
  const [meta, setMeta] = useState("");
  const { error, run } = useAction();
  const creation = useAction();
  const [editing, setEditing] = useState<{ id: string; externalId: string; meta: string; ratelimits: LimitDraft[] } | null>(null);
  const edit = useAction();

  const load = async (cursor: string | undefined) => {
    const page = await callPage("identities.listIdentities", {
      limit: 25,
      ...(cursor ? { cursor } : {}),
      ...(search ? { search } : {}),
    });
    setIdentities(page.items);
    pages.setNext(page.cursor);
  };
  const show = (cursor: string | undefined) => run(() => load(cursor));
  useEffect(() => {
    show(undefined);
  }, []);
  const reload = () => load(pages.current);

  const create = (event: Event) => {
    event.preventDefault();
    creation.run(async () => {
      const parsed = parseMeta(meta);
      await call("identities.createIdentity", { externalId, ...(parsed ? { meta: parsed } : {}) });
      setExternalId("");
      setMeta("");
      await reload();
    });
  };
  const save = (event: Event) => {
    event.preventDefault();
    if (!editing) return;
    edit.run(async () => {
      await call("identities.updateIdentity", {
        identity: editing.id,
        meta: parseMeta(editing.meta) ?? {},
        ratelimits: limitsBody(editing.ratelimits),
      });
      setEditing(null);
      await reload();
    });
  };
  const remove = (id: string) =>
    run(async () => {
      await call("identities.deleteIdentity", { identity: id });
      await reload();
    });

  return (
    <>
      <h1>Identities</h1>
      <ErrorNote error={error} />
      <form onSubmit={create} aria-label="Create an identity">
        <h2>Create an identity</h2>
        <TextField
          label="Identity external id"
          required
          value={externalId}
          onValue={setExternalId}
          error={fieldError(creation.error, "body.externalId")}
        />
        <TextField label="Identity meta (JSON)" rows={2} value={meta} onValue={setMeta} error={fieldError(creation.error, "body.meta")} />
        <button type="submit">Create identity</button>
        <FormError error={creation.error} />
      </form>
      <form
        class="row"
        aria-label="Search identities"
        onSubmit={(event) => {
          event.preventDefault();
          pages.restart();
          show(undefined);
        }}
      >
        <TextField label="Search external ids" value={search} onValue={setSearch} />
        <button type="submit">Search</button>
      </form>
      <DataTable
        label="Identities"
        columns={["External id", "Id", "Meta", "Rate limits", "Credits", "Actions"]}
        empty="No identities."
        items={identities}
        row={(identity) => (
          <tr key={identity.id}>
            <td>{identity.externalId}</td>
            <td>
              <code>{identity.id}</code>
            </td>
            <td>
              <code>{identity.meta ? JSON.stringify(identity.meta) : ""}</code>
            </td>
            <td>{(identity.ratelimits ?? []).map((limit) => `${limit.name}: ${limit.limit}/${limit.duration} ms`).join("; ")}</td>
            <td>{creditsText(identity.credits)}</td>
            <td>
              <button
                type="button"
                aria-label={`Edit ${identity.externalId}`}
                onClick={() =>
                  setEditing({
                    id: identity.id,
                    externalId: identity.externalId,
                    meta: identity.meta ? JSON.stringify(identity.meta, null, 2) : "",
                    ratelimits: (identity.ratelimits ?? []).map((limit) => ({
                      name: limit.name,
                      limit: String(limit.limit),
                      duration: String(limit.duration),
                      autoApply: limit.autoApply,
                    })),
                  })
                }
              >
                Edit
              </button>{" "}
              <ConfirmButton
                label="Delete"
                name={`Delete ${identity.externalId}`}
                title={`Delete the identity ${identity.externalId}?`}
                consequence={<p>Its rate limits and shared credits are deleted with it. This cannot be undone.</p>}
                confirm={`Confirm deleting ${identity.externalId}`}
                onConfirm={() => remove(identity.id)}
              />
            </td>
          </tr>
        )}
      />
      <Pager label="Pages of identities" pages={pages} load={show} />
      {editing && (
        <form onSubmit={save} aria-label="Edit the identity" class="editor">
          <h2>Identity {editing.id}</h2>
          <TextField
            label="Meta (JSON)"
            rows={4}
            value={editing.meta}
            onValue={(meta) => setEditing({ ...editing, meta })}
            error={fieldError(edit.error, "body.meta")}
          />
          <RateLimitsEditor
            limits={editing.ratelimits}
            onChange={(ratelimits) => setEditing({ ...editing, ratelimits })}
            error={edit.error}
          />
          <button type="submit">Save identity</button>{" "}
          <button type="button" onClick={() => setEditing(null)}>
            Close
          </button>
          <FormError error={edit.error} />
        </form>
      )}
      {editing && <UsagePanel scope={{ identity: editing.id }} label={`Usage of ${editing.externalId}`} />}
    </>
  );
}
