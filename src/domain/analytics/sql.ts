/** Writing values into ClickHouse SQL that keygate composes itself (never a customer's text). */

/** A ClickHouse string literal: backslash and quote escaped, so any value stays one literal. */
export function quoteString(value: string): string {
  return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

/** Ids keygate puts into filters; they are generated or validated with this shape, checked again here. */
const SAFE_ID = /^[A-Za-z0-9_]+$/;

export function isSafeId(value: string): boolean {
  return SAFE_ID.test(value);
}

export function safeId(value: string, what: string): string {
  if (!isSafeId(value)) throw new Error(`refusing to put ${what} '${value}' into an analytics filter`);
  return value;
}

/** A settings value: numbers as they are, strings quoted. */
export function settingValue(value: string | number): string {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`setting value ${value} is not finite`);
    return String(value);
  }
  return quoteString(value);
}
