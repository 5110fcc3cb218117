import type { ComponentChildren } from "preact";
import { ApiError } from "../api.js";
import { Field } from "../ui.js";

/** A labelled select bound to one of `options` ([value, label] pairs), with the API's message for its field. */
export function SelectField<T extends string>(props: {
  label: string;
  value: T;
  options: readonly (readonly [T, string])[];
  onValue: (value: T) => void;
  error?: string | undefined;
}) {
  return (
    <Field label={props.label} error={props.error}>
      {(id, describedBy) => (
        <select
          id={id}
          value={props.value}
          aria-describedby={describedBy}
          onChange={(event) => props.onValue(event.currentTarget.value as T)}
        >
          {props.options.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

export function Checkbox(props: { label: ComponentChildren; checked: boolean; onChecked: (checked: boolean) => void }) {
  return (
    <div class="field checkbox">
      <label>
        <input type="checkbox" checked={props.checked} onChange={(event) => props.onChecked(event.currentTarget.checked)} /> {props.label}
      </label>
    </div>
  );
}

/** The 400's messages for exactly `location` (not its fields'): what is wrong with a group of fields as a whole. */
export function GroupError(props: { error: unknown; location: string }) {
  const { error, location } = props;
  if (!(error instanceof ApiError)) return null;
  const messages = error.errors.filter((each) => each.location === location).map((each) => each.message);
  return messages.length === 0 ? null : <small class="field-error">{messages.join("; ")}</small>;
}

/** Buttons that move an item of a list up or down, or remove it; `what` names the item for a screen reader. */
export function ItemButtons(props: {
  what: string;
  index: number;
  count: number;
  move: (from: number, to: number) => void;
  remove: () => void;
}) {
  const { what, index, count, move } = props;
  return (
    <div class="row">
      <button type="button" aria-label={`Move ${what} up`} disabled={index === 0} onClick={() => move(index, index - 1)}>
        Up
      </button>
      <button type="button" aria-label={`Move ${what} down`} disabled={index === count - 1} onClick={() => move(index, index + 1)}>
        Down
      </button>
      <button type="button" aria-label={`Remove ${what}`} onClick={props.remove}>
        Remove
      </button>
    </div>
  );
}

/** A list with the item at `from` moved to `to`. */
export function moved<T>(items: readonly T[], from: number, to: number): T[] {
  const next = [...items];
  const [item] = next.splice(from, 1);
  if (item !== undefined) next.splice(to, 0, item);
  return next;
}

/** A list with the item at `index` changed. */
export function changed<T>(items: readonly T[], index: number, change: Partial<T>): T[] {
  return items.map((item, at) => (at === index ? { ...item, ...change } : item));
}
