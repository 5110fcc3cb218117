import type { ComponentChildren } from "preact";
import { useId, useState } from "preact/hooks";
import { ApiError } from "./api.js";

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
  hint?: string;
  required?: boolean;
  type?: "text" | "number" | "password" | "datetime-local";
  rows?: number;
  class?: string;
  autocomplete?: string;
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

/** A table with a header row of `columns` and a row per item; `empty` stands in the one row when there is none. */
export function DataTable<T>(props: {
  label: string;
  columns: readonly string[];
  items: readonly T[];
  row: (item: T) => ComponentChildren;
  empty?: ComponentChildren;
}) {
  return (
    <table aria-label={props.label}>
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
            <td colSpan={props.columns.length}>{props.empty}</td>
          </tr>
        )}
        {props.items.map(props.row)}
      </tbody>
    </table>
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

/** The pages of a cursor-paginated list seen so far: the cursor of each, and the next one the last answer gave. */
export interface CursorPages {
  /** The cursor of the page shown (undefined for the first). */
  current: string | undefined;
  next: string | undefined;
  setNext(cursor: string | undefined): void;
  /** Back to the first page (a new filter or search). */
  restart(): void;
  hasPrevious: boolean;
  /** Moves to the previous page and gives its cursor. */
  back(): string | undefined;
  /** Moves to the next page and gives its cursor. */
  forward(): string | undefined;
}

export function useCursorPages(): CursorPages {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [next, setNext] = useState<string | undefined>(undefined);
  return {
    current: cursors[cursors.length - 1],
    next,
    setNext,
    restart: () => setCursors([undefined]),
    hasPrevious: cursors.length > 1,
    back: () => {
      const previous = cursors.slice(0, -1);
      setCursors(previous);
      return previous[previous.length - 1];
    },
    forward: () => {
      setCursors([...cursors, next]);
      return next;
    },
  };
}

/** Previous and next page buttons of a cursor-paginated list; `load` shows the page of a cursor. */
export function Pager(props: { label: string; pages: CursorPages; load: (cursor: string | undefined) => void }) {
  const { pages, load } = props;
  return (
    <nav aria-label={props.label} class="row">
      <button type="button" disabled={!pages.hasPrevious} onClick={() => load(pages.back())}>
        Previous page
      </button>
      <button type="button" disabled={pages.next === undefined} onClick={() => load(pages.forward())}>
        Next page
      </button>
    </nav>
  );
}

/** An error's alert, unless a 400 names fields: those messages stand next to their fields instead. */
export function FormError(props: { error: unknown; instead?: string }) {
  const { error } = props;
  if (error instanceof ApiError && error.errors.length > 0) return props.instead ? <p role="alert">{props.instead}</p> : null;
  return <ErrorNote error={error} />;
}
