/** A log line as pino writes it, parsed. */
export interface LogLine {
  level: number;
  msg?: string;
  requestId?: string;
  err?: { type?: string; message?: string; stack?: string; code?: string };
  [field: string]: unknown;
}

export const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

export interface CapturedLog {
  /** Give to buildApp (`logStream`) or the harness (`log`). */
  stream: { write(line: string): void };
  /** Everything written so far, as written. */
  text(): string;
  /** Every line so far, parsed (a line that is not JSON fails the caller). */
  lines(): LogLine[];
}

/** Collects the log lines of an app in memory. */
export function captureLog(): CapturedLog {
  const written: string[] = [];
  return {
    stream: { write: (line: string) => void written.push(line) },
    text: () => written.join(""),
    lines: () =>
      written
        .join("")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as LogLine),
  };
}
