import type { DataOf } from "../api.js";
import { fieldError, TextField } from "../ui.js";
import { Checkbox, changed, GroupError, SelectField } from "./gateway-controls.js";
import { type IDENTIFIER_SOURCES, LOGGED, type RuleDraft } from "./policy-drafts.js";

export type Api = DataOf<"keygate.listApis">[number];
type Rule<K extends RuleDraft["kind"]> = Extract<RuleDraft, { kind: K }>;
/** A form for one kind of rule; `at` is the rule's field in the request body (`body.policies[2].keyauth`). */
interface RuleProps<K extends RuleDraft["kind"]> {
  rule: Rule<K>;
  onChange: (rule: Rule<K>) => void;
  error: unknown;
  at: string;
}

const LOCATIONS = [
  ["bearer", "Authorization: Bearer"],
  ["header", "a header"],
  ["queryParam", "a query parameter"],
] as const;

/** keyauth: the APIs whose keys are taken, where the key is read, a permission query, credits. */
export function KeyauthForm(props: RuleProps<"keyauth"> & { apis: readonly Api[] }) {
  const { rule, onChange, error, at } = props;
  const set = (change: Partial<Rule<"keyauth">>) => onChange({ ...rule, ...change });
  // Keyspaces that are not among the APIs listed (a key space id, say) stay, and can be unticked.
  const choices = [
    ...props.apis.map((api) => ({ id: api.id, name: api.name })),
    ...rule.keyspaces.filter((id) => !props.apis.some((api) => api.id === id)).map((id) => ({ id, name: id })),
  ];
  return (
    <>
      <fieldset>
        <legend>APIs whose keys are accepted</legend>
        {choices.length === 0 && <p class="hint">No APIs yet: create one on the APIs page.</p>}
        {choices.map((api) => (
          <Checkbox
            key={api.id}
            label={
              <>
                {api.name} <code>{api.id}</code>
              </>
            }
            checked={rule.keyspaces.includes(api.id)}
            onChecked={(checked) =>
              set({ keyspaces: checked ? [...rule.keyspaces, api.id] : rule.keyspaces.filter((id) => id !== api.id) })
            }
          />
        ))}
        <GroupError error={error} location={`${at}.keyspaces`} />
        {rule.keyspaces.map((_, index) => (
          <GroupError key={index} error={error} location={`${at}.keyspaces[${index}]`} />
        ))}
      </fieldset>
      <fieldset>
        <legend>Key locations</legend>
        {rule.locations.length === 0 && <p class="hint">None given: Authorization: Bearer &lt;key&gt;.</p>}
        {rule.locations.map((location, index) => {
          const where = `${at}.locations[${index}]`;
          const edit = (change: Partial<typeof location>) => set({ locations: changed(rule.locations, index, change) });
          return (
            <fieldset class="row" key={index}>
              <legend>Key location {index + 1}</legend>
              <SelectField label="Key from" value={location.from} options={LOCATIONS} onValue={(from) => edit({ from })} />
              {location.from !== "bearer" && (
                <TextField
                  label={location.from === "header" ? "Header name" : "Parameter name"}
                  value={location.name}
                  onValue={(name) => edit({ name })}
                  error={fieldError(error, `${where}.${location.from}.name`)}
                />
              )}
              {location.from === "header" && (
                <>
                  <TextField
                    label="Scheme"
                    hint="e.g. Token: the value must start with it"
                    value={location.scheme}
                    onValue={(scheme) => edit({ scheme })}
                    error={fieldError(error, `${where}.header.scheme`)}
                  />
                  <TextField
                    label="Strip prefix"
                    value={location.stripPrefix}
                    onValue={(stripPrefix) => edit({ stripPrefix })}
                    error={fieldError(error, `${where}.header.stripPrefix`)}
                  />
                </>
              )}
              <GroupError error={error} location={where} />
              <button
                type="button"
                aria-label={`Remove key location ${index + 1}`}
                onClick={() => set({ locations: rule.locations.filter((_, other) => other !== index) })}
              >
                Remove
              </button>
            </fieldset>
          );
        })}
        <GroupError error={error} location={`${at}.locations`} />
        <button
          type="button"
          onClick={() => set({ locations: [...rule.locations, { from: "header", name: "", scheme: "", stripPrefix: "" }] })}
        >
          Add a key location
        </button>
      </fieldset>
      <TextField
        label="Permission query"
        hint="e.g. orders.read OR admin; empty: any key of the APIs"
        value={rule.permissionQuery}
        onValue={(permissionQuery) => set({ permissionQuery })}
        error={fieldError(error, `${at}.permissionQuery`)}
      />
      <TextField
        label="Credits per request"
        type="number"
        value={rule.credits}
        onValue={(credits) => set({ credits })}
        error={fieldError(error, `${at}.credits`)}
      />
      {rule.ratelimits && rule.ratelimits.length > 0 && (
        <p class="hint">
          Also applies the key's limits {rule.ratelimits.map((limit) => limit.name).join(", ")} (kept as they are; edit them as JSON).
        </p>
      )}
    </>
  );
}

const IDENTIFIERS: readonly (readonly [(typeof IDENTIFIER_SOURCES)[number], string])[] = [
  ["remoteIp", "the client IP"],
  ["header", "a header"],
  ["authenticatedSubject", "the key's identity (or the key)"],
  ["path", "the path"],
  ["principalField", "a field of the principal"],
];

/** ratelimit: so many requests per window, counted per identifier (its parts joined). */
export function RatelimitForm(props: RuleProps<"ratelimit">) {
  const { rule, onChange, error, at } = props;
  const set = (change: Partial<Rule<"ratelimit">>) => onChange({ ...rule, ...change });
  return (
    <>
      <div class="row">
        <TextField
          label="Limit"
          type="number"
          value={rule.limit}
          onValue={(limit) => set({ limit })}
          error={fieldError(error, `${at}.limit`)}
        />
        <TextField
          label="Window (ms)"
          type="number"
          value={rule.windowMs}
          onValue={(windowMs) => set({ windowMs })}
          error={fieldError(error, `${at}.windowMs`)}
        />
        <TextField
          label="Cost"
          type="number"
          hint="default 1"
          value={rule.cost}
          onValue={(cost) => set({ cost })}
          error={fieldError(error, `${at}.cost`)}
        />
        <TextField
          label="Namespace"
          hint="default: route.policy"
          value={rule.namespace}
          onValue={(namespace) => set({ namespace })}
          error={fieldError(error, `${at}.namespace`)}
        />
      </div>
      <fieldset>
        <legend>Counted by</legend>
        {rule.identifiers.map((identifier, index) => {
          const where = `${at}.identifiers[${index}]`;
          const edit = (change: Partial<typeof identifier>) => set({ identifiers: changed(rule.identifiers, index, change) });
          return (
            <div class="row" key={index}>
              <SelectField
                label={`Identifier ${index + 1}`}
                value={identifier.source}
                options={IDENTIFIERS}
                onValue={(source) => edit({ source })}
              />
              {identifier.source === "header" && (
                <TextField
                  label="Header name"
                  value={identifier.value}
                  onValue={(value) => edit({ value })}
                  error={fieldError(error, `${where}.header.name`)}
                />
              )}
              {identifier.source === "principalField" && (
                <TextField
                  label="Field path"
                  hint="e.g. keyId, identity.externalId"
                  value={identifier.value}
                  onValue={(value) => edit({ value })}
                  error={fieldError(error, `${where}.principalField.path`)}
                />
              )}
              <GroupError error={error} location={where} />
              <button
                type="button"
                aria-label={`Remove identifier ${index + 1}`}
                onClick={() => set({ identifiers: rule.identifiers.filter((_, other) => other !== index) })}
              >
                Remove
              </button>
            </div>
          );
        })}
        <GroupError error={error} location={`${at}.identifiers`} />
        <button type="button" onClick={() => set({ identifiers: [...rule.identifiers, { source: "remoteIp", value: "" }] })}>
          Add an identifier
        </button>
      </fieldset>
    </>
  );
}

/** firewall: deny, every request it applies to, or only clients in (or outside) address lists. */
export function FirewallForm(props: RuleProps<"firewall">) {
  const { rule, onChange, error, at } = props;
  return (
    <>
      <p class="hint">
        Denies (ACTION_DENY) the requests it applies to; with lists, only clients outside the allowed or inside the denied.
      </p>
      <TextField
        label="Allow only (addresses or CIDR ranges)"
        hint="One per line"
        rows={2}
        value={rule.ipAllow}
        onValue={(ipAllow) => onChange({ ...rule, ipAllow })}
        error={fieldError(error, `${at}.ipAllow`)}
      />
      <TextField
        label="Deny (addresses or CIDR ranges)"
        hint="One per line"
        rows={2}
        value={rule.ipDeny}
        onValue={(ipDeny) => onChange({ ...rule, ipDeny })}
        error={fieldError(error, `${at}.ipDeny`)}
      />
    </>
  );
}

const LOGGED_LABELS: Record<(typeof LOGGED)[number], string> = {
  requestHeaders: "Request headers",
  responseHeaders: "Response headers",
  requestBody: "Request body",
  responseBody: "Response body",
  query: "Query string",
};

/** logging: what the request's analytics event records besides the defaults. */
export function LoggingForm(props: RuleProps<"logging">) {
  const { rule, onChange } = props;
  return (
    <fieldset class="row">
      <legend>Record</legend>
      {LOGGED.map((part) => (
        <Checkbox key={part} label={LOGGED_LABELS[part]} checked={rule[part]} onChecked={(on) => onChange({ ...rule, [part]: on })} />
      ))}
    </fieldset>
  );
}
