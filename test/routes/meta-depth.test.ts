import t from "tap";
import { assertInvalidAt } from "../helpers/assertions.js";
import { createApi, createKey, getKey } from "../helpers/fixtures.js";
import { type CallResult, type Harness, harness, ROOT_KEY, STORAGE_KINDS } from "../helpers/harness.js";

/** `{"level":{"level":...1...}}`: meta nested `levels` deep, counting meta itself, as JSON text. */
function nestedMeta(levels: number): string {
  return `${'{"level":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;
}

/** POST with a raw JSON body: a deeply nested value is written as text, never through JSON.stringify. */
async function callRaw(h: Harness, procedure: string, json: string): Promise<CallResult> {
  const response = await h.app.inject({
    method: "POST",
    url: `/v2/${procedure}`,
    headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
    payload: json,
  });
  return { status: response.statusCode, headers: response.headers, body: response.json() };
}

function depthOf(value: unknown): number {
  let depth = 0;
  for (let node = value; node !== null && typeof node === "object"; node = (node as Record<string, unknown>).level) depth++;
  return depth;
}

for (const storage of STORAGE_KINDS) {
  t.test(`meta nesting on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage });
    const apiId = await createApi(h);
    const { keyId } = await createKey(h, apiId);
    await h.call("identities.createIdentity", { externalId: "deep_meta" });

    await t.test("meta nested more than 100 levels is a 400 at body.meta, however deep, on every procedure that takes meta", async (t) => {
      for (const levels of [101, 3_000, 10_000]) {
        const meta = nestedMeta(levels);
        const bodies: [string, string][] = [
          ["keys.createKey", `{"apiId":"${apiId}","meta":${meta}}`],
          ["keys.updateKey", `{"keyId":"${keyId}","meta":${meta}}`],
          ["identities.createIdentity", `{"externalId":"deep_${levels}","meta":${meta}}`],
          ["identities.updateIdentity", `{"identity":"deep_meta","meta":${meta}}`],
        ];
        for (const [procedure, body] of bodies) {
          t.comment(`${procedure}, ${levels} levels`);
          assertInvalidAt(t, await callRaw(h, procedure, body), "body.meta", "must not nest objects and arrays more than 100 levels deep");
        }
      }
      t.equal((await getKey(h, keyId)).meta, undefined, "the key was not changed");
      t.equal(
        (await h.call("identities.getIdentity", { identity: "deep_meta" })).body.data.meta,
        undefined,
        "the identity was not changed",
      );
      t.equal((await h.call("identities.getIdentity", { identity: "deep_101" })).status, 404, "no identity was made");
    });

    await t.test("meta nested exactly 100 levels is stored and comes back whole", async (t) => {
      const meta = nestedMeta(100);
      const created = await callRaw(h, "keys.createKey", `{"apiId":"${apiId}","meta":${meta}}`);
      t.equal(created.status, 200);
      t.equal(depthOf((await getKey(h, created.body.data.keyId)).meta), 100, "getKey");
      t.equal(depthOf((await h.call("keys.verifyKey", { key: created.body.data.key })).body.data.meta), 100, "verifyKey");
      t.equal((await callRaw(h, "identities.updateIdentity", `{"identity":"deep_meta","meta":${meta}}`)).status, 200);
      t.equal(depthOf((await h.call("identities.getIdentity", { identity: "deep_meta" })).body.data.meta), 100, "getIdentity");
    });
  });
}
