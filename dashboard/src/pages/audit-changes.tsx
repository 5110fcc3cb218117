import type { DataOf } from "../api.js";

type Change = DataOf<"keygate.listAuditLogs">[number]["changes"][number];

/** Larger JSON than this (lines before × lines after) is shown removed whole and added whole, not matched line by line. */
const MATCHED_LINES_AT_MOST = 250_000;

/** A value as a change shows it on one line: "—" for not set, a string as it is, anything else as JSON. */
function inline(value: unknown): string {
  return value === null || value === undefined ? "—" : typeof value === "string" ? value : JSON.stringify(value);
}

const isStructured = (value: unknown) => typeof value === "object" && value !== null;

/**
 * One changed field of an audit entry: `field: old → new` for plain values; for an object or a list (a key's
 * credits, a route's policies) a collapsible line diff of the two values as pretty-printed JSON.
 */
export function ChangeView({ change }: { change: Change }) {
  if (!isStructured(change.old) && !isStructured(change.new))
    return (
      <div class="change">
        <strong>{change.field}</strong>: {inline(change.old)} → {inline(change.new)}
      </div>
    );
  const before = change.old === null || change.old === undefined ? [] : JSON.stringify(change.old, null, 2).split("\n");
  const after = change.new === null || change.new === undefined ? [] : JSON.stringify(change.new, null, 2).split("\n");
  const lines = lineDiff(before, after);
  const removed = lines.filter((line) => line.kind === "removed").length;
  const added = lines.filter((line) => line.kind === "added").length;
  return (
    <details class="change">
      <summary>
        <strong>{change.field}</strong>: {before.length === 0 ? "set" : after.length === 0 ? "removed" : "changed"} (
        {`${removed} line${removed === 1 ? "" : "s"} removed, ${added} added`})
      </summary>
      <pre class="diff">
        {lines.map((line, index) => (
          <span key={index} class={line.kind}>
            {line.kind === "removed" ? "- " : line.kind === "added" ? "+ " : "  "}
            {line.text}
          </span>
        ))}
      </pre>
    </details>
  );
}

interface DiffLine {
  kind: "same" | "removed" | "added";
  text: string;
}

/** The lines of `after` against `before`: kept, removed and added, in order (a longest common subsequence). */
export function lineDiff(before: readonly string[], after: readonly string[]): DiffLine[] {
  if (before.length * after.length > MATCHED_LINES_AT_MOST)
    return [...before.map((text) => ({ kind: "removed" as const, text })), ...after.map((text) => ({ kind: "added" as const, text }))];
  // common[i][j]: the length of the longest common subsequence of before[i..] and after[j..].
  const common = Array.from({ length: before.length + 1 }, () => new Array<number>(after.length + 1).fill(0));
  for (let i = before.length - 1; i >= 0; i--)
    for (let j = after.length - 1; j >= 0; j--)
      (common[i] as number[])[j] =
        before[i] === after[j]
          ? ((common[i + 1] as number[])[j + 1] as number) + 1
          : Math.max((common[i + 1] as number[])[j] as number, (common[i] as number[])[j + 1] as number);
  const lines: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < before.length || j < after.length) {
    if (i < before.length && j < after.length && before[i] === after[j]) {
      lines.push({ kind: "same", text: before[i++] as string });
      j++;
    } else if (
      j < after.length &&
      (i === before.length || ((common[i] as number[])[j + 1] as number) >= ((common[i + 1] as number[])[j] as number))
    ) {
      lines.push({ kind: "added", text: after[j++] as string });
    } else {
      lines.push({ kind: "removed", text: before[i++] as string });
    }
  }
  return lines;
}
