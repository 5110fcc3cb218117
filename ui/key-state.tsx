import { useId } from "preact/hooks";

/** How long a rerolled key's predecessor goes on working unless another time is picked: long enough to swap it in. */
export const DEFAULT_GRACE_MS = 3_600_000;

const GRACE_PERIODS = [
  [0, "no time: it stops at once"],
  [3_600_000, "1 hour"],
  [86_400_000, "1 day"],
  [604_800_000, "7 days"],
] as const;

/** The choice, in a reroll's confirmation, of how long the old key keeps working (keys.rerollKey's `expiration`). */
export function GracePeriodField(props: { label: string; value: number; onValue: (ms: number) => void }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select id={id} value={props.value} onChange={(event) => props.onValue(Number(event.currentTarget.value))}>
        {GRACE_PERIODS.map(([ms, label]) => (
          <option key={ms} value={ms}>
            {label}
          </option>
        ))}
      </select>
    </div>
  );
}

/**
 * Whether a key works now: disabled, expired, stopping at a time (after a reroll, say), or active. A rerolled key
 * keeps its name, so its state is what tells it from its successor.
 */
export function KeyState(props: { enabled: boolean; expires: number | undefined; formatTime: (ms: number) => string }) {
  const { expires } = props;
  if (!props.enabled) return <span class="badge off">disabled</span>;
  if (expires !== undefined && expires <= Date.now()) return <span class="badge off">expired {props.formatTime(expires)}</span>;
  if (expires !== undefined) return <span class="badge">stops {props.formatTime(expires)}</span>;
  return <span class="badge ok">active</span>;
}
