import type { Test } from "tap";
import { DEFAULT_DOCS_URL, ERROR_CATALOGUE, type ErrorCode, errorTypeUrl } from "../../src/errors/catalogue.js";
import type { CallResult, Harness } from "./harness.js";

type Asserts = Test;

/** The response is the error envelope (docs/decisions.md#errors) for `code`, with the catalogue's status and title. */
export function assertError(t: Asserts, result: CallResult, code: ErrorCode, detailPattern?: RegExp): void {
  const entry = ERROR_CATALOGUE[code];
  t.equal(result.status, entry.status, `status ${entry.status} for ${code} (detail: ${result.body?.error?.detail})`);
  t.equal(result.body?.error?.type, errorTypeUrl(code, DEFAULT_DOCS_URL), "error.type names the code");
  t.equal(result.body?.error?.title, entry.title, "error.title from the catalogue");
  t.equal(result.body?.error?.status, entry.status, "error.status repeats the HTTP status");
  t.match(result.body?.meta?.requestId, /^req_[1-9A-HJ-NP-Za-km-z]+$/, "meta.requestId is a req_ id");
  t.equal(result.headers["x-request-id"], result.body?.meta?.requestId, "x-request-id header matches meta.requestId");
  if (detailPattern) t.match(result.body?.error?.detail, detailPattern, "detail explains");
}

/** A 400 invalid_input whose errors[] has an entry at `location` (and, if given, with that message). */
export function assertInvalidAt(t: Asserts, result: CallResult, location: string, message?: string | RegExp): void {
  assertError(t, result, "err:unkey:application:invalid_input");
  const entries: { location: string; message: string }[] = result.body?.error?.errors ?? [];
  const entry = entries.find((candidate) => candidate.location === location);
  t.ok(entry, `an errors[] entry at ${location} (got ${entries.map((e) => `${e.location}: ${e.message}`).join("; ")})`);
  if (entry && message !== undefined) t.match(entry.message, message, `message at ${location}`);
}

/** The four ways of not being authenticated, each a 401 with its own code. */
export async function checkUnauthenticated(t: Asserts, h: Harness, procedure: string, body: unknown): Promise<void> {
  await t.test(`${procedure}: 401 without Authorization, with a non-Bearer scheme, with no key, or with an unknown key`, async (t) => {
    assertError(t, await h.call(procedure, body, { rootKey: null }), "err:unkey:authentication:missing");
    assertError(
      t,
      await h.call(procedure, body, { rootKey: null, headers: { authorization: "Basic dXNlcjpwYXNz" } }),
      "err:unkey:authentication:malformed",
    );
    assertError(
      t,
      await h.call(procedure, body, { rootKey: null, headers: { authorization: "Bearer" } }),
      "err:unkey:authentication:malformed",
    );
    assertError(t, await h.call(procedure, body, { rootKey: "root_this_key_does_not_exist" }), "err:unkey:authentication:key_not_found");
  });
}

/**
 * 403 for a root key without the needed permission, naming each of `missing` in the detail; and each set of
 * permissions in `accepted` is enough on its own (the call then gets `okStatus`). `body` is called per attempt
 * so procedures that change state get a fresh target each time.
 */
export async function checkPermissions(
  t: Asserts,
  h: Harness,
  procedure: string,
  body: () => Promise<unknown> | unknown,
  expectation: { missing: string[]; accepted: string[][]; okStatus?: number },
): Promise<void> {
  await t.test(`${procedure}: 403 names the missing permission; each accepted permission set suffices`, async (t) => {
    const unrelated = await h.rootKey(["unrelated.*.not_a_real_action"]);
    const denied = await h.call(procedure, await body(), { rootKey: unrelated });
    assertError(t, denied, "err:unkey:authorization:insufficient_permissions");
    for (const name of expectation.missing) t.match(denied.body?.error?.detail, name, `detail names ${name}`);
    for (const permissions of expectation.accepted) {
      const rootKey = await h.rootKey(permissions);
      const result = await h.call(procedure, await body(), { rootKey });
      t.equal(
        result.status,
        expectation.okStatus ?? 200,
        `accepted with ${permissions.join(" + ")} (got ${JSON.stringify(result.body?.error ?? "")})`,
      );
    }
  });
}
