import type { ComponentChildren } from "preact";
import { ApiError, type BodyOf, type DataOf } from "../api.js";
import { Field, fieldError, fromDateTimeInput, numberOr, splitList, TextField, toDateTimeInput } from "../ui.js";

/** What the create and edit forms share: the fields of keys.createKey that a key keeps after it is made. */
export interface KeyFields {
  name: string;
  externalId: string;
  meta: string;
  expires: string;
  enabled: boolean;
  creditsRemaining: string;
  refillInterval: "" | "daily" | "monthly";
  refillAmount: string;
  refillDay: string;
  ratelimits: LimitDraft[];
  permissions: string;
  roles: string;
}

export const EMPTY_KEY_FIELDS: KeyFields = {
  name: "",
  externalId: "",
  meta: "",
  expires: "",
  enabled: true,
  creditsRemaining: "",
  refillInterval: "",
  refillAmount: "",
  refillDay: "",
  ratelimits: [],
  permissions: "",
  roles: "",
};

/** A key as getKey and listKeys show it. */
export type KeyAsShown = DataOf<"keys.getKey">;

export function fieldsOf(key: KeyAsShown): KeyFields {
  return {
    name: key.name ?? "",
    externalId: key.identity?.externalId ?? "",
    meta: key.meta ? JSON.stringify(key.meta, null, 2) : "",
    expires: toDateTimeInput(key.expires),
    enabled: key.enabled,
    creditsRemaining: key.credits?.remaining === null || key.credits === undefined ? "" : String(key.credits.remaining),
    refillInterval: (key.credits?.refill?.interval as KeyFields["refillInterval"]) ?? "",
    refillAmount: key.credits?.refill ? String(key.credits.refill.amount) : "",
    refillDay: key.credits?.refill?.refillDay !== undefined ? String(key.credits.refill.refillDay) : "",
    ratelimits: (key.ratelimits ?? []).map((limit) => ({
      name: limit.name,
      limit: String(limit.limit),
      duration: String(limit.duration),
      autoApply: limit.autoApply,
    })),
    permissions: (key.permissions ?? []).join("\n"),
    roles: (key.roles ?? []).join("\n"),
  };
}

/** The form's values as the API takes them, an emptied field as null. */
function requestValues(fields: KeyFields) {
  return {
    name: fields.name || null,
    externalId: fields.externalId || null,
    meta: metaOf(fields.meta),
    expires: fromDateTimeInput(fields.expires) ?? null,
    enabled: fields.enabled,
    remaining: fields.creditsRemaining === "" ? null : numberOr(fields.creditsRemaining),
    refill: refillBody(fields),
    ratelimits: limitsBody(fields.ratelimits),
    permissions: splitList(fields.permissions),
    roles: splitList(fields.roles),
  };
}

function metaOf(text: string): Record<string, unknown> | null {
  if (text.trim() === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_input", "Meta is not valid JSON.", [{ location: "body.meta", message: "must be a JSON object" }]);
  }
}

/** keys.createKey's fields for these form values: an emptied field is left out. */
export function createFields(fields: KeyFields): Omit<BodyOf<"keys.createKey">, "apiId" | "prefix" | "byteLength" | "recoverable"> {
  const { name, externalId, meta, expires, remaining, refill, ...always } = requestValues(fields);
  return {
    ...always,
    ...(name !== null ? { name } : {}),
    ...(externalId !== null ? { externalId } : {}),
    ...(meta !== null ? { meta } : {}),
    ...(expires !== null ? { expires } : {}),
    ...(remaining !== null || refill !== null ? { credits: { remaining, ...(refill !== null ? { refill } : {}) } } : {}),
  };
}

/** keys.updateKey's fields for these form values: an emptied field is null, which clears it. */
export function updateFields(fields: KeyFields): Omit<BodyOf<"keys.updateKey">, "keyId"> {
  const { remaining, refill, ...values } = requestValues(fields);
  return { ...values, credits: remaining === null && refill === null ? null : { remaining, refill } };
}

/** The controls for KeyFields, each labelled, each showing the API's message for its field. */
export function KeyFieldControls(props: {
  fields: KeyFields;
  onChange: (fields: KeyFields) => void;
  error: unknown;
  extra?: ComponentChildren;
}) {
  const { fields, error } = props;
  const set = <K extends keyof KeyFields>(name: K, value: KeyFields[K]) => props.onChange({ ...fields, [name]: value });
  const text = (label: string, name: "name" | "externalId", location: string, type: "text" | "number" = "text") => (
    <TextField label={label} type={type} value={fields[name]} onValue={(value) => set(name, value)} error={fieldError(error, location)} />
  );
  return (
    <>
      {text("Name", "name", "body.name")}
      {text("External id", "externalId", "body.externalId")}
      {props.extra}
      <TextField
        label="Expires (UTC)"
        type="datetime-local"
        value={fields.expires}
        onValue={(value) => set("expires", value)}
        error={fieldError(error, "body.expires")}
      />
      <div class="field checkbox">
        <label>
          <input type="checkbox" checked={fields.enabled} onChange={(event) => set("enabled", event.currentTarget.checked)} /> Enabled
        </label>
      </div>
      <CreditsFieldset
        fields={fields}
        onChange={(credits) => props.onChange({ ...fields, ...credits })}
        error={error}
        location="body.credits"
      />
      <RateLimitsEditor limits={fields.ratelimits} onChange={(limits) => set("ratelimits", limits)} error={error} />
      <TextField
        label="Permissions"
        hint="One per line"
        rows={2}
        value={fields.permissions}
        onValue={(value) => set("permissions", value)}
        error={fieldError(error, "body.permissions")}
      />
      <TextField
        label="Roles"
        hint="One per line"
        rows={2}
        value={fields.roles}
        onValue={(value) => set("roles", value)}
        error={fieldError(error, "body.roles")}
      />
      <TextField
        label="Meta (JSON)"
        rows={3}
        value={fields.meta}
        onValue={(value) => set("meta", value)}
        error={fieldError(error, "body.meta")}
      />
    </>
  );
}

/** A key's credits as a form edits them: numbers as typed, checked by the API. */
export type CreditFields = Pick<KeyFields, "creditsRemaining" | "refillInterval" | "refillAmount" | "refillDay">;

/** The credits' fields (remaining, refill), each showing the API's message for its field under `location`. */
export function CreditsFieldset(props: {
  fields: CreditFields;
  onChange: (fields: CreditFields) => void;
  error: unknown;
  location: string;
  hint?: string;
}) {
  const { fields, error, location } = props;
  const set = (change: Partial<CreditFields>) =>
    props.onChange({
      creditsRemaining: fields.creditsRemaining,
      refillInterval: fields.refillInterval,
      refillAmount: fields.refillAmount,
      refillDay: fields.refillDay,
      ...change,
    });
  return (
    <fieldset>
      <legend>Credits</legend>
      <TextField
        label="Remaining credits"
        type="number"
        hint={props.hint}
        value={fields.creditsRemaining}
        onValue={(creditsRemaining) => set({ creditsRemaining })}
        error={fieldError(error, `${location}.remaining`)}
      />
      <Field label="Refill" error={fieldError(error, `${location}.refill.interval`)}>
        {(id, describedBy) => (
          <select
            id={id}
            value={fields.refillInterval}
            aria-describedby={describedBy}
            onChange={(event) => set({ refillInterval: event.currentTarget.value as KeyFields["refillInterval"] })}
          >
            <option value="">never</option>
            <option value="daily">daily</option>
            <option value="monthly">monthly</option>
          </select>
        )}
      </Field>
      {fields.refillInterval !== "" && (
        <TextField
          label="Refill amount"
          type="number"
          value={fields.refillAmount}
          onValue={(refillAmount) => set({ refillAmount })}
          error={fieldError(error, `${location}.refill.amount`)}
        />
      )}
      {fields.refillInterval === "monthly" && (
        <TextField
          label="Refill day"
          type="number"
          value={fields.refillDay}
          onValue={(refillDay) => set({ refillDay })}
          error={fieldError(error, `${location}.refill.refillDay`)}
        />
      )}
    </fieldset>
  );
}

/** The credits' `refill` as the API takes it, null for none. */
export function refillBody(fields: CreditFields) {
  return fields.refillInterval === ""
    ? null
    : {
        interval: fields.refillInterval,
        amount: numberOr(fields.refillAmount),
        ...(fields.refillDay !== "" ? { refillDay: numberOr(fields.refillDay) } : {}),
      };
}

/** A rate limit as the form edits it: numbers as typed, checked by the API. */
export interface LimitDraft {
  name: string;
  limit: string;
  duration: string;
  autoApply: boolean;
}

/** The body's `ratelimits` from the drafts; what is not a number goes as typed, for the API to name. */
export function limitsBody(limits: readonly LimitDraft[]) {
  return limits.map((limit) => ({
    name: limit.name,
    limit: numberOr(limit.limit),
    duration: numberOr(limit.duration),
    autoApply: limit.autoApply,
  }));
}

/** Named rate limits (a key's or an identity's): each labelled, each showing the API's message for its field. */
export function RateLimitsEditor({
  limits,
  onChange,
  error,
  location = "body.ratelimits",
}: {
  limits: readonly LimitDraft[];
  onChange: (limits: LimitDraft[]) => void;
  error: unknown;
  /** Where the 400 names them. */
  location?: string;
}) {
  const setLimit = (index: number, change: Partial<LimitDraft>) =>
    onChange(limits.map((limit, at) => (at === index ? { ...limit, ...change } : limit)));
  return (
    <fieldset>
      <legend>Rate limits</legend>
      {limits.map((limit, index) => (
        <fieldset class="row" key={index}>
          <legend>Rate limit {index + 1}</legend>
          <TextField
            label="Limit name"
            value={limit.name}
            onValue={(name) => setLimit(index, { name })}
            error={fieldError(error, `${location}[${index}].name`)}
          />
          <TextField
            label="Requests"
            type="number"
            value={limit.limit}
            onValue={(value) => setLimit(index, { limit: value })}
            error={fieldError(error, `${location}[${index}].limit`)}
          />
          <TextField
            label="Per milliseconds"
            type="number"
            value={limit.duration}
            onValue={(duration) => setLimit(index, { duration })}
            error={fieldError(error, `${location}[${index}].duration`)}
          />
          <div class="field checkbox">
            <label>
              <input
                type="checkbox"
                checked={limit.autoApply}
                onChange={(event) => setLimit(index, { autoApply: event.currentTarget.checked })}
              />{" "}
              Apply automatically
            </label>
          </div>
          <button type="button" onClick={() => onChange(limits.filter((_, at) => at !== index))}>
            Remove rate limit {index + 1}
          </button>
        </fieldset>
      ))}
      <button type="button" onClick={() => onChange([...limits, { name: "requests", limit: "", duration: "60000", autoApply: true }])}>
        Add a rate limit
      </button>
    </fieldset>
  );
}
