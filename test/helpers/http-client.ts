import type { CallResult } from "./harness.js";

/** GET `url` over real HTTP with `headers`: the status, the headers, and the body (parsed when it is JSON). */
export async function getResult(url: string, headers: Record<string, string> = {}): Promise<CallResult> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  return { status: response.status, headers: Object.fromEntries(response.headers), body: text.startsWith("{") ? JSON.parse(text) : text };
}
