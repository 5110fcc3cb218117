import { useEffect, useState } from "preact/hooks";
import { ApiError, call, callPage } from "../api.js";
import { ErrorNote, Field, FormError, fieldError, Pager, useCursorPages } from "../ui.js";
import { type LimitDraft, limitsBody, RateLimitsEditor } from "./key-form.js";

interface Identity {
  id: string;
  externalId: string;
  meta?: Record<string, unknown>;
  ratelimits?: { name: string; limit: number; duration: number; autoApply?: boolean }[];
}

function parseMeta(text: string): Record<string, unknown> | undefined {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_input", "Meta is not valid JSON.", [{ location: "body.meta", message: "must be a JSON object" }]);
  }
}

/** Identities: list (search, pages), create, edit meta and rate limits, delete. */
export function IdentitiesPage() {
  const [identities, setIdentities] = useState<Identity[]>([]);
  const pages = useCursorPages();
  const [search, setSearch] = useState("");
  const [externalId, setExternalId] = useState("");
  const [meta, setMeta] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [createError, setCreateError] = useState<unknown>(null);
  const [editing, setEditing] = useState<{ id: string; meta: string; ratelimits: LimitDraft[] } | null>(null);
  const [editError, setEditError] = useState<unknown>(null);

  const load = async (cursor: string | undefined) => {
    setError(null);
    try {
      const page = await callPage<Identity>("identities.listIdentities", {
        limit: 25,
        ...(cursor ? { cursor } : {}),
        ...(search ? { search } : {}),
      });
      setIdentities(page.items);
      pages.setNext(page.cursor);
    } catch (failure) {
      setError(failure);
    }
  };
  useEffect(() => {
    load(undefined);
  }, []);
  const reload = () => load(pages.current);

  const create = async (event: Event) => {
    event.preventDefault();
    setCreateError(null);
    try {
      const parsed = parseMeta(meta);
      await call("identities.createIdentity", { externalId, ...(parsed ? { meta: parsed } : {}) });
      setExternalId("");
      setMeta("");
      await reload();
    } catch (failure) {
      setCreateError(failure);
    }
  };
  const save = async (event: Event) => {
    event.preventDefault();
    if (!editing) return;
    setEditError(null);
    try {
      await call("identities.updateIdentity", {
        identity: editing.id,
        meta: parseMeta(editing.meta) ?? {},
        ratelimits: limitsBody(editing.ratelimits),
      });
      setEditing(null);
      await reload();
    } catch (failure) {
      setEditError(failure);
    }
  };
  const remove = async (id: string) => {
    setError(null);
    try {
      await call("identities.deleteIdentity", { identity: id });
      await reload();
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <>
      <h1>Identities</h1>
      <ErrorNote error={error} />
      <form onSubmit={create} aria-label="Create an identity">
        <h2>Create an identity</h2>
        <Field label="Identity external id" error={fieldError(createError, "body.externalId")}>
          {(id, describedBy) => (
            <input
              id={id}
              required
              value={externalId}
              aria-describedby={describedBy}
              onInput={(event) => setExternalId(event.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Identity meta (JSON)" error={fieldError(createError, "body.meta")}>
          {(id, describedBy) => (
            <textarea
              id={id}
              rows={2}
              value={meta}
              aria-describedby={describedBy}
              onInput={(event) => setMeta(event.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit">Create identity</button>
        <FormError error={createError} />
      </form>
      <form
        class="row"
        aria-label="Search identities"
        onSubmit={(event) => {
          event.preventDefault();
          pages.restart();
          load(undefined);
        }}
      >
        <Field label="Search external ids">
          {(id) => <input id={id} value={search} onInput={(event) => setSearch(event.currentTarget.value)} />}
        </Field>
        <button type="submit">Search</button>
      </form>
      <table aria-label="Identities">
        <thead>
          <tr>
            <th scope="col">External id</th>
            <th scope="col">Id</th>
            <th scope="col">Meta</th>
            <th scope="col">Rate limits</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {identities.length === 0 && (
            <tr>
              <td colSpan={5}>No identities.</td>
            </tr>
          )}
          {identities.map((identity) => (
            <tr key={identity.id}>
              <td>{identity.externalId}</td>
              <td>
                <code>{identity.id}</code>
              </td>
              <td>
                <code>{identity.meta ? JSON.stringify(identity.meta) : ""}</code>
              </td>
              <td>{(identity.ratelimits ?? []).map((limit) => `${limit.name}: ${limit.limit}/${limit.duration} ms`).join("; ")}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Edit ${identity.externalId}`}
                  onClick={() =>
                    setEditing({
                      id: identity.id,
                      meta: identity.meta ? JSON.stringify(identity.meta, null, 2) : "",
                      ratelimits: (identity.ratelimits ?? []).map((limit) => ({
                        name: limit.name,
                        limit: String(limit.limit),
                        duration: String(limit.duration),
                        autoApply: limit.autoApply ?? false,
                      })),
                    })
                  }
                >
                  Edit
                </button>{" "}
                <button type="button" aria-label={`Delete ${identity.externalId}`} onClick={() => remove(identity.id)}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager label="Pages of identities" pages={pages} load={load} />
      {editing && (
        <form onSubmit={save} aria-label="Edit the identity" class="editor">
          <h2>Identity {editing.id}</h2>
          <Field label="Meta (JSON)" error={fieldError(editError, "body.meta")}>
            {(id, describedBy) => (
              <textarea
                id={id}
                rows={4}
                value={editing.meta}
                aria-describedby={describedBy}
                onInput={(event) => setEditing({ ...editing, meta: event.currentTarget.value })}
              />
            )}
          </Field>
          <RateLimitsEditor
            limits={editing.ratelimits}
            onChange={(ratelimits) => setEditing({ ...editing, ratelimits })}
            error={editError}
          />
          <button type="submit">Save identity</button>{" "}
          <button type="button" onClick={() => setEditing(null)}>
            Close
          </button>
          <FormError error={editError} />
        </form>
      )}
    </>
  );
}
