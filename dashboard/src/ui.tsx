import type { ComponentChildren } from "preact";
import { useId, useState } from "preact/hooks";
import { ConfirmButton } from "../../ui/confirm.js";
import { type CursorPages, Pager, useCursorPages } from "../../ui/pager.js";
import { TableScroll } from "../../ui/shell.js";
import { ShownOnce } from "../../ui/shown-once.js";
import { ApiError } from "./api.js";

export { ConfirmButton, type CursorPages, Pager, ShownOnce, useCursorPages };

/** A labelled control with the API's message for its field (a 400's `errors[].location`) right under it. */
export function Field(props: {
  label: string;
  error?: string | undefined;
  hint?: string | undefined;
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

/** A labelled text control bound to a string: an input, or a textarea when `rows` is given. */
export function TextField(props: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  error?: string | undefined;
  hint?: string | undefined;
  required?: boolean;
  type?: "text" | "number" | "password" | "datetime-local";
  rows?: number;
  class?: string;
  autocomplete?: string;
  placeholder?: string;
}) {
  const { label, error, hint, value, onValue, rows, ...attributes } = props;
  const onInput = (event: Event) => onValue((event.currentTarget as HTMLInputElement | HTMLTextAreaElement).value);
  return (
    <Field label={label} error={error} hint={hint}>
      {(id, describedBy) =>
        rows === undefined ? (
          <input id={id} value={value} aria-describedby={describedBy} onInput={onInput} {...attributes} />
        ) : (
          <textarea id={id} rows={rows} value={value} aria-describedby={describedBy} onInput={onInput} {...attributes} />
        )
      }
    </Field>
  );
}

/** An action's error, cleared when the next action starts: `run` does one and keeps what it throws. */
export function useAction(): {
  error: unknown;
  setError: (error: unknown) => void;
  run: (action: () => Promise<unknown>) => Promise<void>;
} {
  const [error, setError] = useState<unknown>(null);
  const run = async (action: () => Promise<unknown>) => {
    setError(null);
    try {
      await action();
    } catch (failure) {
      setError(failure);
    }
  };
  return { error, setError, run };
}

/**
 * A table with a header row of `columns` and a row per item; `empty` stands in the one row when there is none, and
 * says what to do next.
 */
export function DataTable<T>(props: {
  label: string;
  columns: readonly string[];
  items: readonly T[];
  row: (item: T) => ComponentChildren;
  empty?: ComponentChildren;
  class?: string;
}) {
  return (
    <TableScroll label={props.label}>
      <table aria-label={props.label} class={props.class}>
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th scope="col" key={column}>
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.items.length === 0 && props.empty !== undefined && (
            <tr>
              <td class="empty" colSpan={props.columns.length}>
                {props.empty}
              </td>
            </tr>
          )}
          {props.items.map(props.row)}
        </tbody>
      </table>
    </TableScroll>
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

/**
 * A number typed in a field, sent as a number when it is one. Anything else goes as typed, for the API's 400 to name
 * the field: the one place a body leaves its type on purpose, so it is typed as the number the API asks for.
 */
export function numberOr(text: string): number {
  const value = Number(text);
  return text.trim() !== "" && Number.isFinite(value) ? value : (text as unknown as number);
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

/** An error's alert, unless a 400 names fields: those messages stand next to their fields instead. */
export function FormError(props: { error: unknown; instead?: string }) {
  const { error } = props;
  if (error instanceof ApiError && error.errors.length > 0) return props.instead ? <p role="alert">{props.instead}</p> : null;
  return <ErrorNote error={error} />;
}
