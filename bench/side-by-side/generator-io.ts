/**
 * What the load generators are told and what they print, as plain text: wrk's Lua script for a target's request, and
 * wrk's and h2load's reports read back as a Load. No process is started here (load.ts runs them).
 */

/** The request a target is loaded with. */
export interface RequestShape {
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  /**
   * A fixed body, or `{ numbered }`: a body in which `{n}` becomes a number of its own for every request of the run
   * (for bodies that must differ), or `{ drawn, from }`: one in which `{n}` becomes a whole number drawn uniformly
   * from 0 to `from` - 1 for every request. Building every request costs the load generator CPU that the servers
   * then lack on a small machine: use it only when needed, and alike for the targets compared.
   */
  body?: string | { numbered: string } | { drawn: string; from: number };
}

/** What the load generator saw of one slice. */
export interface Load {
  requests: number;
  seconds: number;
  /** Latency percentiles in ms, rounded as autocannon reports them. */
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** How many slices of `slice` seconds make up `duration` (at least one). */
export function sliceCount(duration: number, slice: number): number {
  return Math.max(1, Math.round(duration / slice));
}

/** What h2load printed and its --log-file (start µs, status, duration µs per line), as a Load. */
export function parseH2loadOutput(output: string, log: string): Load {
  const finished = /finished in ([\d.]+)(us|ms|s|m),/.exec(output);
  const requests = /requests: \d+ total, \d+ started, (\d+) done, \d+ succeeded, \d+ failed, (\d+) errored, (\d+) timeout/.exec(output);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(output);
  if (!finished || !requests || !codes) throw new Error(`h2load did not report its requests:\n${output}`);
  const latencies = log
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => Number(line.split("\t")[2]) / 1_000)
    .sort((a, b) => a - b);
  const percentile = (p: number) =>
    latencies.length === 0 ? Number.NaN : Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] as number);
  return {
    requests: Number(requests[1]),
    seconds: milliseconds(finished[1] as string, finished[2] as string) / 1_000,
    p50: percentile(0.5),
    p99: percentile(0.99),
    non2xx: Number(codes[2]) + Number(codes[3]) + Number(codes[4]),
    errors: Number(requests[2]) + Number(requests[3]),
  };
}

/** The Lua script that makes wrk send the target's request; numbered bodies count on from `firstNumber`. */
export function wrkScript(target: RequestShape, firstNumber: number): string {
  const { body } = target;
  const lines = [
    `wrk.method = ${luaString(target.method ?? "GET")}`,
    ...Object.entries(target.headers ?? {}).map(([name, value]) => `wrk.headers[${luaString(name)}] = ${luaString(value)}`),
  ];
  if (typeof body === "string") lines.push(`wrk.body = ${luaString(body)}`);
  if (typeof body === "object" && "numbered" in body) {
    const parts = body.numbered.split("{n}").map(luaString).join(", ");
    lines.push(
      `local n = ${firstNumber}`,
      `local parts = { ${parts} }`,
      "request = function()",
      "  n = n + 1",
      "  return wrk.format(nil, nil, nil, table.concat(parts, tostring(n)))",
      "end",
    );
  }
  if (typeof body === "object" && "drawn" in body) {
    const parts = body.drawn.split("{n}").map(luaString).join(", ");
    lines.push(
      `local parts = { ${parts} }`,
      "request = function()",
      `  return wrk.format(nil, nil, nil, table.concat(parts, tostring(math.random(0, ${body.from - 1}))))`,
      "end",
    );
  }
  return lines.join("\n");
}

function luaString(text: string): string {
  return JSON.stringify(text); // A JSON string of printable text is a valid Lua string literal.
}

/** What wrk --latency printed, as a Load; throws when it reported no requests. */
export function parseWrkOutput(output: string): Load {
  const requests = /(\d+) requests in ([\d.]+)(us|ms|s|m)\b/.exec(output);
  if (!requests) throw new Error(`wrk did not report its requests:\n${output}`);
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  return {
    requests: Number(requests[1]),
    seconds: milliseconds(requests[2] as string, requests[3] as string) / 1_000,
    p50: latencyMs(output, "50%"),
    p99: latencyMs(output, "99%"),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0),
    errors: socketErrors ? socketErrors.slice(1).reduce((sum, count) => sum + Number(count), 0) : 0,
  };
}

function milliseconds(value: string, unit: string): number {
  return Number(value) * ({ us: 0.001, ms: 1, s: 1_000, m: 60_000 } as Record<string, number>)[unit]!;
}

/** A percentile of wrk's latency distribution, in ms rounded as autocannon reports it (NaN when absent). */
function latencyMs(output: string, percentile: string): number {
  const line = new RegExp(`^\\s+${percentile}\\s+([\\d.]+)(us|ms|s|m)\\s*$`, "m").exec(output);
  return line ? Math.round(milliseconds(line[1] as string, line[2] as string)) : Number.NaN;
}
