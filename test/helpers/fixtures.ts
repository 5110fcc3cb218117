import type { Harness } from "./harness.js";

/** Creates an API with the harness root key and returns its id. */
export async function createApi(h: Harness, name = "fixture-api"): Promise<string> {
  const result = await h.call("apis.createApi", { name });
  if (result.status !== 200) throw new Error(`createApi failed: ${JSON.stringify(result.body)}`);
  return result.body.data.apiId as string;
}

/** Creates a key with the harness root key; `fields` are merged into the body. */
export async function createKey(h: Harness, apiId: string, fields: Record<string, unknown> = {}): Promise<{ keyId: string; key: string }> {
  const result = await h.call("keys.createKey", { apiId, ...fields });
  if (result.status !== 200) throw new Error(`createKey failed: ${JSON.stringify(result.body)}`);
  return result.body.data as { keyId: string; key: string };
}

/** getKey's data for a key id (status must be 200). */
export async function getKey(h: Harness, keyId: string, decrypt = false): Promise<any> {
  const result = await h.call("keys.getKey", { keyId, decrypt });
  if (result.status !== 200) throw new Error(`getKey failed: ${JSON.stringify(result.body)}`);
  return result.body.data;
}

/** 32 random-looking bytes, base64: a vault key for tests. */
export const TEST_VAULT_KEY = Buffer.alloc(32, 42).toString("base64");
