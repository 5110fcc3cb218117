import type { ComponentChildren } from "preact";
import { useId } from "preact/hooks";
import { ApiError } from "./api.js";

/** A labelled control with the API's message for its field (a 400's `errors[].location`) right under it. */
export function Field(props: {
  label: string;
  error?: string | undefined;
  hint?: string;
  children: (id: string, describedBy: string | undefined) => ComponentChildren;
}) {
  const id = useId();
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const describedBy = [props.error ? errorId : "", props.hint ? hintId : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id, describedBy)}
      {props.hint && (
        <small id={hintId} class="hint">
          {props.hint}
        </small>
      )}
      {props.error && (
        <small id={errorId} class="field-error">
          {props.error}
        </small>
      )}
    </div>
  );
}

/** An error that names no field: shown as an alert, with the API's code. */
export function ErrorNote(props: { error: unknown }) {
  if (!props.error) return null;
  const error = props.error;
  const forbidden = error instanceof ApiError && error.status === 403;
  return (
    <p role="alert" class="error">
      {forbidden ? "Not allowed: " : ""}
      {error instanceof Error ? error.message : String(error)}
      {error instanceof ApiError && error.code ? <code> {error.code}</code> : null}
    </p>
  );
}

/** A secret shown once: the warning, the value and a copy button. */
export function ShownOnce(props: { label: string; value: string; onDismiss: () => void }) {
  return (
    <section class="shown-once" aria-label={props.label}>
      <p>
        <strong>Copy it now: this {props.label.toLowerCase()} is shown once and cannot be shown again.</strong>
      </p>
      <output aria-label={props.label}>{props.value}</output>{" "}
      <button type="button" onClick={() => navigator.clipboard?.writeText(props.value)}>
        Copy
      </button>{" "}
      <button type="button" onClick={props.onDismiss}>
        Done
      </button>
    </section>
  );
}

/** The 400 message for `location`, if `error` is a 400 naming it. */
export function fieldError(error: unknown, location: string): string | undefined {
  return error instanceof ApiError ? error.forField(location) : undefined;
}

/** A list typed one item per line or comma-separated, empty items dropped. */
export function splitList(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

export function formatTime(ms: number | undefined): string {
  return ms === undefined ? "" : new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

/** datetime-local value (UTC) ↔ unix ms. */
export function fromDateTimeInput(value: string): number | undefined {
  return value === "" ? undefined : Date.parse(`${value}Z`);
}

export function toDateTimeInput(ms: number | undefined): string {
  return ms === undefined ? "" : new Date(ms).toISOString().slice(0, 16);
}
