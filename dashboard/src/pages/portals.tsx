import { useEffect, useState } from "preact/hooks";
import { type BodyOf, call, type DataOf } from "../api.js";
import {
  ConfirmButton,
  DataTable,
  ErrorNote,
  Field,
  FormError,
  fieldError,
  formatTime,
  numberOr,
  splitList,
  TextField,
  useAction,
} from "../ui.js";
import { type CreditFields, CreditsFieldset, type LimitDraft, limitsBody, RateLimitsEditor, refillBody } from "./key-form.js";

type Portal = DataOf<"portal.listPortals">["portals"][number];
type KeyDefaults = NonNullable<BodyOf<"portal.createPortal">["keyDefaults"]>;
const SCOPES = ["keys:read", "keys:create", "keys:reroll", "analytics:read"] as const;

/** A portal as the form edits it; the key defaults are what a customer's new key gets (portal.createKey). */
interface PortalDraft extends CreditFields {
  slug: string;
  displayName: string;
  apiId: string;
  primaryColor: string;
  logoUrl: string;
  prefix: string;
  byteLength: string;
  permissions: string;
  roles: string;
  ratelimits: LimitDraft[];
}

function draftOf(portal: Portal | null, apis: DataOf<"keygate.listApis">): PortalDraft {
  const defaults = portal?.keyDefaults;
  const refill = defaults?.credits?.refill;
  return {
    slug: portal?.slug ?? "",
    displayName: portal?.displayName ?? "",
    // With one API there is nothing to choose; with several the operator picks one (nothing is picked for them).
    apiId: portal?.mapping.type === "keyspace" ? portal.mapping.id : apis.length === 1 ? (apis[0]?.id ?? "") : "",
    primaryColor: portal?.primaryColor ?? "",
    logoUrl: portal?.logoUrl ?? "",
    prefix: defaults?.prefix ?? "",
    byteLength: defaults?.byteLength === undefined ? "" : String(defaults.byteLength),
    permissions: (defaults?.permissions ?? []).join("\n"),
    roles: (defaults?.roles ?? []).join("\n"),
    ratelimits: (defaults?.ratelimits ?? []).map((limit) => ({
      name: limit.name,
      limit: String(limit.limit),
      duration: String(limit.duration),
      autoApply: limit.autoApply,
    })),
    creditsRemaining:
      defaults?.credits?.remaining === undefined || defaults.credits.remaining === null ? "" : String(defaults.credits.remaining),
    refillInterval: (refill?.interval as CreditFields["refillInterval"]) ?? "",
    refillAmount: refill ? String(refill.amount) : "",
    refillDay: refill?.refillDay === undefined ? "" : String(refill.refillDay),
  };
}

/** The key defaults the form says, or undefined when it says none: an emptied field is left out. */
function keyDefaultsOf(draft: PortalDraft): KeyDefaults | undefined {
  const permissions = splitList(draft.permissions);
  const roles = splitList(draft.roles);
  const refill = refillBody(draft);
  const credits =
    draft.creditsRemaining === "" && refill === null
      ? undefined
      : { remaining: draft.creditsRemaining === "" ? null : numberOr(draft.creditsRemaining), ...(refill ? { refill } : {}) };
  const defaults: KeyDefaults = {
    ...(draft.prefix ? { prefix: draft.prefix } : {}),
    ...(draft.byteLength ? { byteLength: numberOr(draft.byteLength) } : {}),
    ...(permissions.length > 0 ? { permissions } : {}),
    ...(roles.length > 0 ? { roles } : {}),
    ...(draft.ratelimits.length > 0 ? { ratelimits: limitsBody(draft.ratelimits) } : {}),
    ...(credits ? { credits } : {}),
  };
  return Object.keys(defaults).length > 0 ? defaults : undefined;
}

/** The workspace's customer portals: create and edit one per API, enable or disable, delete, and preview a customer's view. */
export function PortalsPage() {
  const [portals, setPortals] = useState<Portal[] | null>(null);
  const [apis, setApis] = useState<DataOf<"keygate.listApis">>([]);
  const [editing, setEditing] = useState<Portal | null>(null);
  const [draft, setDraft] = useState<PortalDraft>(() => draftOf(null, []));
  const [preview, setPreview] = useState<{ portal: string; externalId: string; url?: string }>({ portal: "", externalId: "" });
  const { error, run } = useAction();
  const saving = useAction();

  const load = async () => setPortals((await call("portal.listPortals", {})).portals);
  useEffect(() => {
    run(load);
    call("keygate.listApis", {}).then(
      (listed) => {
        setApis(listed);
        setDraft((current) => (current.apiId === "" && listed.length === 1 ? { ...current, apiId: listed[0]?.id ?? "" } : current));
      },
      () => setApis([]),
    );
  }, []);

  const edit = (portal: Portal | null) => {
    setEditing(portal);
    setDraft(draftOf(portal, apis));
  };
  const set = (change: Partial<PortalDraft>) => setDraft({ ...draft, ...change });

  const save = (event: Event) => {
    event.preventDefault();
    saving.run(async () => {
      const mapping = { type: "keyspace" as const, id: draft.apiId };
      const keyDefaults = keyDefaultsOf(draft);
      const common = { slug: draft.slug, displayName: draft.displayName };
      if (editing) {
        await call("portal.updatePortal", {
          portal: editing.portalId,
          ...common,
          ...(editing.mapping.type === "keyspace" ? { mapping } : {}),
          logoUrl: draft.logoUrl || null,
          primaryColor: draft.primaryColor || null,
          keyDefaults: keyDefaults ?? null,
        });
      } else {
        await call("portal.createPortal", {
          ...common,
          mapping,
          enabled: true,
          ...(draft.logoUrl ? { logoUrl: draft.logoUrl } : {}),
          ...(draft.primaryColor ? { primaryColor: draft.primaryColor } : {}),
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
      if (editing?.portalId === portal.portalId) edit(null);
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
  const defaultsError = (location: string) => fieldError(saving.error, `body.keyDefaults.${location}`);

  return (
    <>
      <h1>Portals</h1>
      <p>Your customers manage their own keys and see their usage in a portal; your application sends them there.</p>
      <ErrorNote error={error} />
      <form onSubmit={save} aria-label={editing ? "Edit the portal" : "Create a portal"}>
        <h2>{editing ? `Edit ${editing.displayName}` : "Create a portal"}</h2>
        <div class="row">
          <TextField
            label="Portal slug"
            hint="The portal's address: /portal/<slug>"
            value={draft.slug}
            onValue={(slug) => set({ slug })}
            error={fieldError(saving.error, "body.slug")}
          />
          <TextField
            label="Portal name"
            value={draft.displayName}
            onValue={(displayName) => set({ displayName })}
            error={fieldError(saving.error, "body.displayName")}
          />
          {(!editing || editing.mapping.type === "keyspace") && (
            <Field label="Portal API" error={fieldError(saving.error, "body.mapping.id")} hint="Whose keys the customers manage here">
              {(id, describedBy) => (
                <select
                  id={id}
                  required
                  value={draft.apiId}
                  aria-describedby={describedBy}
                  onChange={(event) => set({ apiId: (event.currentTarget as HTMLSelectElement).value })}
                >
                  <option value="" disabled>
                    Choose an API…
                  </option>
                  {apis.map((api) => (
                    <option key={api.id} value={api.id}>
                      {api.name} ({api.id})
                    </option>
                  ))}
                </select>
              )}
            </Field>
          )}
        </div>
        <div class="row">
          <TextField
            label="Portal colour"
            hint="#rrggbb"
            value={draft.primaryColor}
            onValue={(primaryColor) => set({ primaryColor })}
            error={fieldError(saving.error, "body.primaryColor")}
          />
          <TextField
            label="Portal logo URL"
            value={draft.logoUrl}
            onValue={(logoUrl) => set({ logoUrl })}
            error={fieldError(saving.error, "body.logoUrl")}
          />
        </div>
        <fieldset>
          <legend>What a customer's new key gets</legend>
          <p class="hint">
            A key made in the portal has these, as keys.createKey would give them: give it the permissions and limits the API's routes ask
            for, or its requests are refused there.
          </p>
          <div class="row">
            <TextField
              label="Prefix of customers' new keys"
              value={draft.prefix}
              onValue={(prefix) => set({ prefix })}
              error={defaultsError("prefix")}
            />
            <TextField
              label="Byte length of customers' new keys"
              type="number"
              hint="16 to 255; empty: 16"
              value={draft.byteLength}
              onValue={(byteLength) => set({ byteLength })}
              error={defaultsError("byteLength")}
            />
          </div>
          <div class="row">
            <TextField
              label="Permissions of customers' new keys"
              hint="One per line"
              rows={2}
              value={draft.permissions}
              onValue={(permissions) => set({ permissions })}
              error={defaultsError("permissions")}
            />
            <TextField
              label="Roles of customers' new keys"
              hint="One per line"
              rows={2}
              value={draft.roles}
              onValue={(roles) => set({ roles })}
              error={defaultsError("roles")}
            />
          </div>
          <RateLimitsEditor
            limits={draft.ratelimits}
            onChange={(ratelimits) => set({ ratelimits })}
            error={saving.error}
            location="body.keyDefaults.ratelimits"
          />
          <CreditsFieldset
            fields={draft}
            onChange={(credits) => set(credits)}
            error={saving.error}
            location="body.keyDefaults.credits"
            hint="Empty: unlimited"
          />
        </fieldset>
        <div class="actions">
          <button type="submit">{editing ? "Save portal" : "Create portal"}</button>
          {editing && (
            <button type="button" onClick={() => edit(null)}>
              Cancel
            </button>
          )}
        </div>
        <FormError error={saving.error} instead="The portal was not saved: see the fields marked above." />
      </form>
      {portals && (
        <DataTable
          label="Portals"
          columns={["Slug", "Name", "Serves", "New keys get", "Created", "State", "Actions"]}
          empty="No portals yet: create one above, then send your customers there with portal.createSession."
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
              <td>{describeDefaults(portal.keyDefaults)}</td>
              <td>{formatTime(portal.createdAt)}</td>
              <td>{portal.enabled ? <span class="badge ok">enabled</span> : <span class="badge off">disabled</span>}</td>
              <td>
                <div class="actions">
                  <button type="button" aria-label={`Edit ${portal.slug}`} onClick={() => edit(portal)}>
                    Edit
                  </button>
                  <button
                    type="button"
                    aria-label={`${portal.enabled ? "Disable" : "Enable"} ${portal.slug}`}
                    onClick={() => toggle(portal)}
                  >
                    {portal.enabled ? "Disable" : "Enable"}
                  </button>
                  <ConfirmButton
                    label="Delete"
                    name={`Delete ${portal.slug}`}
                    title={`Delete the portal ${portal.displayName}?`}
                    consequence={
                      <p>
                        Its page at /portal/{portal.slug} stops working and every customer's session in it ends. The keys customers made
                        there are kept.
                      </p>
                    }
                    confirm={`Confirm deleting ${portal.slug}`}
                    onConfirm={() => remove(portal)}
                  />
                </div>
              </td>
            </tr>
          )}
        />
      )}
      <form onSubmit={openPreview} aria-label="Preview a customer's view">
        <h2>Preview a customer's view</h2>
        <div class="row">
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
        </div>
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

/** A portal's key defaults in a few words: what a customer's new key holds. */
function describeDefaults(defaults: Portal["keyDefaults"]): string {
  if (!defaults) return "the API's defaults";
  const parts = [
    defaults.prefix ? `prefix ${defaults.prefix}` : "",
    defaults.permissions?.length ? `permissions ${defaults.permissions.join(", ")}` : "",
    defaults.roles?.length ? `roles ${defaults.roles.join(", ")}` : "",
    ...(defaults.ratelimits ?? []).map((limit) => `${limit.name}: ${limit.limit} per ${limit.duration} ms`),
    defaults.credits ? `${defaults.credits.remaining ?? "unlimited"} credits` : "",
  ];
  return parts.filter(Boolean).join("; ") || "the API's defaults";
}
