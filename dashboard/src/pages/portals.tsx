import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { DataTable, ErrorNote, Field, fieldError, formatTime, TextField, useAction } from "../ui.js";

type Portal = DataOf<"portal.listPortals">["portals"][number];
const SCOPES = ["keys:read", "keys:create", "keys:reroll", "analytics:read"] as const;

/** The workspace's customer portals: create and edit one per API, enable or disable, delete, and preview a customer's view. */
export function PortalsPage() {
  const [portals, setPortals] = useState<Portal[] | null>(null);
  const [apis, setApis] = useState<DataOf<"keygate.listApis">>([]);
  const [editing, setEditing] = useState<Portal | null>(null);
  const [slug, setSlug] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [apiId, setApiId] = useState("");
  const [primaryColor, setPrimaryColor] = useState("");
  const [logoUrl, setLogoUrl] = useState("");
  const [prefix, setPrefix] = useState("");
  const [preview, setPreview] = useState<{ portal: string; externalId: string; url?: string }>({ portal: "", externalId: "" });
  const { error, run } = useAction();
  const saving = useAction();

  const load = async () => setPortals((await call("portal.listPortals", {})).portals);
  useEffect(() => {
    run(load);
    call("keygate.listApis", {}).then(setApis, () => setApis([]));
  }, []);

  const edit = (portal: Portal | null) => {
    setEditing(portal);
    setSlug(portal?.slug ?? "");
    setDisplayName(portal?.displayName ?? "");
    setApiId(portal?.mapping.type === "keyspace" ? portal.mapping.id : "");
    setPrimaryColor(portal?.primaryColor ?? "");
    setLogoUrl(portal?.logoUrl ?? "");
    setPrefix(portal?.keyDefaults?.prefix ?? "");
  };

  const save = (event: Event) => {
    event.preventDefault();
    saving.run(async () => {
      const mapping = { type: "keyspace" as const, id: apiId || apis[0]?.id || "" };
      const keyDefaults = prefix ? { prefix } : undefined;
      if (editing) {
        await call("portal.updatePortal", {
          portal: editing.portalId,
          slug,
          displayName,
          ...(editing.mapping.type === "keyspace" ? { mapping } : {}),
          logoUrl: logoUrl || null,
          primaryColor: primaryColor || null,
          keyDefaults: keyDefaults ?? null,
        });
      } else {
        await call("portal.createPortal", {
          slug,
          displayName,
          mapping,
          enabled: true,
          ...(logoUrl ? { logoUrl } : {}),
          ...(primaryColor ? { primaryColor } : {}),
          ...(keyDefaults ? { keyDefaults } : {}),
        });
      }
      edit(null);
      await load();
    });
  };

  const toggle = (portal: Portal) =>
    run(async () => {
      await call("portal.updatePortal", { portal: portal.portalId, enabled: !portal.enabled });
      await load();
    });
  const remove = (portal: Portal) =>
    run(async () => {
      await call("portal.deletePortal", { portal: portal.portalId });
      await load();
    });
  const openPreview = (event: Event) => {
    event.preventDefault();
    run(async () => {
      const { url } = await call("portal.createSession", {
        portal: preview.portal,
        externalId: preview.externalId,
        scopes: [...SCOPES],
        preview: true,
      });
      setPreview({ ...preview, url });
    });
  };

  return (
    <>
      <h1>Portals</h1>
      <p>Your customers manage their own keys and see their usage in a portal; your application sends them there.</p>
      <ErrorNote error={error} />
      <form onSubmit={save} aria-label={editing ? "Edit the portal" : "Create a portal"}>
        <h2>{editing ? `Edit ${editing.displayName}` : "Create a portal"}</h2>
        <TextField
          label="Portal slug"
          hint="The portal's address: /portal/<slug>"
          value={slug}
          onValue={setSlug}
          error={fieldError(saving.error, "body.slug")}
        />
        <TextField label="Portal name" value={displayName} onValue={setDisplayName} error={fieldError(saving.error, "body.displayName")} />
        {(!editing || editing.mapping.type === "keyspace") && (
          <Field label="Portal API">
            {(id) => (
              <select id={id} value={apiId} onChange={(event) => setApiId((event.currentTarget as HTMLSelectElement).value)}>
                {apis.map((api) => (
                  <option key={api.id} value={api.id}>
                    {api.name} ({api.id})
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
        <TextField
          label="Portal colour"
          hint="#rrggbb"
          value={primaryColor}
          onValue={setPrimaryColor}
          error={fieldError(saving.error, "body.primaryColor")}
        />
        <TextField label="Portal logo URL" value={logoUrl} onValue={setLogoUrl} error={fieldError(saving.error, "body.logoUrl")} />
        <TextField
          label="Prefix of customers' new keys"
          value={prefix}
          onValue={setPrefix}
          error={fieldError(saving.error, "body.keyDefaults")}
        />
        <button type="submit">{editing ? "Save portal" : "Create portal"}</button>
        {editing && (
          <button type="button" onClick={() => edit(null)}>
            Cancel
          </button>
        )}
        <ErrorNote error={saving.error} />
      </form>
      {portals && (
        <DataTable
          label="Portals"
          columns={["Slug", "Name", "Serves", "Created", "State", "Actions"]}
          empty="No portals yet."
          items={portals}
          row={(portal) => (
            <tr key={portal.portalId}>
              <td>
                <a href={`/portal/${portal.slug}`}>{portal.slug}</a>
              </td>
              <td>{portal.displayName}</td>
              <td>
                {portal.mapping.type} <code>{portal.mapping.id}</code>
              </td>
              <td>{formatTime(portal.createdAt)}</td>
              <td>{portal.enabled ? "enabled" : "disabled"}</td>
              <td>
                <button type="button" aria-label={`Edit ${portal.slug}`} onClick={() => edit(portal)}>
                  Edit
                </button>
                <button type="button" aria-label={`${portal.enabled ? "Disable" : "Enable"} ${portal.slug}`} onClick={() => toggle(portal)}>
                  {portal.enabled ? "Disable" : "Enable"}
                </button>
                <button type="button" aria-label={`Delete ${portal.slug}`} onClick={() => remove(portal)}>
                  Delete
                </button>
              </td>
            </tr>
          )}
        />
      )}
      <form onSubmit={openPreview} aria-label="Preview a customer's view">
        <h2>Preview a customer's view</h2>
        <TextField
          label="Preview portal (slug)"
          value={preview.portal}
          onValue={(portal) => setPreview({ portal, externalId: preview.externalId })}
        />
        <TextField
          label="Customer's externalId"
          value={preview.externalId}
          onValue={(externalId) => setPreview({ portal: preview.portal, externalId })}
        />
        <button type="submit">Make a preview link</button>
        {preview.url && (
          <p>
            <a href={preview.url} target="_blank" rel="noreferrer" data-testid="preview-link">
              Open the portal as {preview.externalId}
            </a>{" "}
            (one use, 15 minutes)
          </p>
        )}
      </form>
    </>
  );
}
