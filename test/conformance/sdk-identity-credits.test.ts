import t from "tap";
import { STORAGE_KINDS } from "../helpers/harness.js";
import { sdkApp } from "./helpers.js";

// Identity credits through the official SDK, as far as it can say them: the identity's balance is given over the
// wire (the SDK's createIdentity has no credits field), and keys created, verified and read by the SDK spend it.
// The SDK parses the answers with keygate's extra fields (creditsSource, lowThreshold) and keeps its own.

for (const storage of STORAGE_KINDS) {
  t.test(`the @unkey/api SDK against identity credits on ${storage} stores`, async (t) => {
    const { unkey, h } = await sdkApp(t, { storage });
    const apiId = (await unkey.apis.createApi({ name: "sdk-identity-credits" })).data.apiId;
    const created = await h.call("identities.createIdentity", { externalId: "sdk_customer", credits: { remaining: 2, lowThreshold: 1 } });
    t.equal(created.status, 200);
    const shared = (await unkey.keys.createKey({ apiId, externalId: "sdk_customer" })).data;
    const own = (await unkey.keys.createKey({ apiId, externalId: "sdk_customer", credits: { remaining: 5 } })).data;

    const first = (await unkey.keys.verifyKey({ key: shared.key })).data;
    t.equal(first.valid, true);
    t.equal(first.code, "VALID");
    t.equal(first.credits, 1, "the identity's balance after the verification");
    t.equal(first.identity?.externalId, "sdk_customer");
    t.equal((await unkey.keys.verifyKey({ key: shared.key })).data.credits, 0);
    const exceeded = (await unkey.keys.verifyKey({ key: shared.key })).data;
    t.equal(exceeded.valid, false);
    t.equal(exceeded.code, "USAGE_EXCEEDED", "the shared balance cannot pay");
    t.equal(exceeded.credits, 0);

    t.equal((await unkey.keys.verifyKey({ key: own.key })).data.credits, 4, "a key's own balance wins");
    const read = (await unkey.keys.getKey({ keyId: shared.keyId })).data;
    t.equal(read.credits, undefined, "the key itself stays unlimited");
    const identity = (await unkey.identities.getIdentity({ identity: "sdk_customer" })).data;
    t.equal(identity.externalId, "sdk_customer", "getIdentity's answer, with keygate's credits, parses");
  });
}
