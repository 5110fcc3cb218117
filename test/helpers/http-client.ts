import type { CallResult } from "./harness.js";

/** GET `url` over real HTTP with `headers`: the status, the headers, and the body (parsed when it is JSON). */
export async function getResult(url: string, headers: Record<string, string> = {}): Promise<CallResult> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  return { status: response.status, headers: Object.fromEntries(response.headers), body: text.startsWith("{") ? JSON.parse(text) : text };
}

/** A fetch answer read whole: its status, its headers, and its body parsed when it is JSON, else its text. */
export async function readAnswer(response: Response): Promise<{ status: number; headers: Headers; body: unknown }> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, headers: response.headers, body };
}
