import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Unkey } from "@unkey/api";
import { ResponseValidationError, SDKValidationError, UnkeyError } from "@unkey/api/models/errors";
import type { Test } from "tap";
import { type Harness, type HarnessOptions, harness, ROOT_KEY } from "../helpers/harness.js";

/**
 * The management methods of `@unkey/api` that keygate serves (every keys.* but verifyKey), named
 * as `<sdk namespace>.<method>`, which is also the procedure's path under /v2.
 */
export const SDK_METHODS = [
  "apis.createApi",
  "apis.getApi",
  "apis.listKeys",
  "apis.deleteApi",
  "keys.createKey",
  "keys.getKey",
  "keys.whoami",
  "keys.updateKey",
  "keys.updateCredits",
  "keys.deleteKey",
  "keys.rerollKey",
  "keys.migrateKeys",
  "keys.addPermissions",
  "keys.removePermissions",
  "keys.setPermissions",
  "keys.addRoles",
  "keys.removeRoles",
  "keys.setRoles",
  "permissions.createPermission",
  "permissions.getPermission",
  "permissions.listPermissions",
  "permissions.deletePermission",
  "permissions.createRole",
  "permissions.getRole",
  "permissions.listRoles",
  "permissions.deleteRole",
  "permissions.setRolePermissions",
  "identities.createIdentity",
  "identities.getIdentity",
  "identities.listIdentities",
  "identities.updateIdentity",
  "identities.deleteIdentity",
] as const;

export type SdkMethod = (typeof SDK_METHODS)[number];

/**
 * The SDK's verification, rate limit and analytics methods (test/conformance/sdk-verification.test.ts), named the
 * same way; `ratelimits.` procedures are served under the SDK's singular `ratelimit.` too.
 */
export const VERIFICATION_SDK_METHODS = [
  "keys.verifyKey",
  "ratelimit.limit",
  "ratelimit.multiLimit",
  "ratelimit.setOverride",
  "ratelimit.getOverride",
  "ratelimit.listOverrides",
  "ratelimit.deleteOverride",
  "analytics.getVerifications",
] as const;

export type VerificationSdkMethod = (typeof VERIFICATION_SDK_METHODS)[number];

/** The fields the SDK's KeyResponseData knows; anything else in a key on the wire is unknown to SDK users. */
export const KEY_RESPONSE_FIELDS: readonly string[] = [
  "keyId",
  "start",
  "enabled",
  "name",
  "meta",
  "createdAt",
  "updatedAt",
  "lastUsedAt",
  "expires",
  "permissions",
  "roles",
  "credits",
  "identity",
  "plaintext",
  "ratelimits",
];

/** A keygate listening on a loopback port, with SDK clients pointed at it. */
export interface SdkApp {
  h: Harness;
  baseUrl: string;
  /** A client authenticated with the harness's all-powerful root key. */
  unkey: Unkey;
  /** A client authenticated with `rootKey`. */
  client(rootKey: string): Unkey;
}

/** A 32-byte vault key, base64, as the configuration wants it. */
export function vaultKey(): string {
  return randomBytes(32).toString("base64");
}

/** Builds an app with the harness (closed when `t` ends) and serves it over real HTTP for the SDK. */
export async function sdkApp(t: Test, options: HarnessOptions = {}): Promise<SdkApp> {
  const h = await harness(t, options);
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const { port } = h.app.server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;
  const client = (rootKey: string) => new Unkey({ rootKey, serverURL: baseUrl, retryConfig: { strategy: "none" } });
  return { h, baseUrl, unkey: client(ROOT_KEY), client };
}

/** Turns the SDK's schema errors into an error that says which method's response did not parse, and how. */
function explainSchemaError(method: string, error: unknown): unknown {
  if (error instanceof ResponseValidationError) {
    return new Error(
      `${method}: keygate's response does not match the SDK's schema (status ${error.statusCode})\n${error.pretty()}\nbody: ${error.body}`,
      { cause: error },
    );
  }
  if (error instanceof SDKValidationError) {
    return new Error(`${method}: the SDK could not validate a value\n${error.pretty()}`, { cause: error });
  }
  return error;
}

/** Which SDK methods (of `methods`, by default the management ones) have returned a success the SDK parsed. */
export class Coverage<M extends string = SdkMethod> {
  readonly passed = new Set<M>();
  readonly methods: readonly M[];

  constructor(methods: readonly M[] = SDK_METHODS as readonly string[] as readonly M[]) {
    this.methods = methods;
  }

  /** Runs one SDK call; a parsed success marks `method` as passing, a schema mismatch fails with the zod issues. */
  async call<T>(method: M, run: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await run();
    } catch (error) {
      throw explainSchemaError(method, error);
    }
    this.passed.add(method);
    return result;
  }

  /** Runs a list method and follows its page iterator to the end; every page must parse. */
  async pages<V>(method: M, start: () => Promise<AsyncIterable<V>>, maxPages = 50): Promise<V[]> {
    return this.call(method, async () => {
      const pages: V[] = [];
      for await (const page of await start()) {
        pages.push(page);
        if (pages.length > maxPages) throw new Error(`${method}: more than ${maxPages} pages; the cursor does not advance`);
      }
      return pages;
    });
  }

  missing(): M[] {
    return this.methods.filter((method) => !this.passed.has(method));
  }
}

type ErrorClass<E> = abstract new (...args: never[]) => E;

/**
 * The call fails with the SDK's typed error `type` and HTTP `status`; answers the error (undefined after a
 * failed assertion). A schema mismatch or another error class is a failure that shows the response.
 */
export async function rejectsWith<E extends UnkeyError>(
  t: Test,
  call: Promise<unknown>,
  type: ErrorClass<E>,
  status: number,
  what: string,
): Promise<E | undefined> {
  try {
    await call;
  } catch (error) {
    if (error instanceof type) {
      t.equal(error.statusCode, status, `${what}: HTTP ${status}`);
      return error;
    }
    if (error instanceof ResponseValidationError) {
      t.fail(
        `${what}: expected ${type.name} ${status}, but the error body does not match the SDK's schema\n${error.pretty()}\nbody: ${error.body}`,
      );
    } else if (error instanceof UnkeyError) {
      t.fail(
        `${what}: expected ${type.name} ${status}, got ${error.name} ${error.statusCode} (content-type ${error.contentType}) body: ${error.body}`,
      );
    } else {
      t.fail(`${what}: expected ${type.name} ${status}, got ${String(error)}`);
    }
    return undefined;
  }
  t.fail(`${what}: expected ${type.name} ${status}, but the call succeeded`);
  return undefined;
}

export interface RawResponse {
  status: number;
  contentType: string | null;
  body: unknown;
}

/** POST /v2/<procedure> over HTTP without the SDK, to see the JSON the SDK would strip unknown fields from. */
export async function postRaw(app: SdkApp, procedure: string, body: unknown, rootKey = ROOT_KEY): Promise<RawResponse> {
  const response = await fetch(`${app.baseUrl}/v2/${procedure}`, {
    method: "POST",
    headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get("content-type"), body: text === "" ? undefined : JSON.parse(text) };
}

/** `value` as a plain object (for looking at raw JSON), or an empty one. */
export function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
