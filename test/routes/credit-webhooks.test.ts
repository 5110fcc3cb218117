import t from "tap";
import { harness, STORAGE_KINDS } from "../helpers/harness.js";
import { waitFor } from "../helpers/wait.js";
import { Receiver, verifySignature } from "../helpers/webhook-receiver.js";

// Credit crossings end to end: verifications spend a key's and an identity's balance, the verification that
// crosses posts the notice, the dispatcher queues it and the receiver gets it signed, once per crossing, again
// after a top-up and a new crossing.

const CREDIT_EVENTS = ["key.credits.low", "key.credits.exhausted", "identity.credits.low", "identity.credits.exhausted"];

for (const storage of STORAGE_KINDS) {
  t.test(`credit crossings reach a webhook receiver once each, on ${storage} stores`, async (t) => {
    const h = await harness(t, { storage, config: { webhooks: { allowPrivateAddresses: true, pollIntervalMs: 20 } } });
    const receiver = new Receiver();
    await receiver.start();
    t.teardown(() => receiver.stop());
    const { secret } = (
      await h.call("keygate.createWebhook", { url: receiver.url, events: [...CREDIT_EVENTS, "key.created", "key.updated"] })
    ).body.data;
    const apiId = (await h.call("apis.createApi", { name: `credits-${storage}` })).body.data.apiId;
    /** Every credit event received so far, by type, once the marker (a key created after them) has arrived. */
    const creditEvents = async (markers: number) => {
      const created = await h.call("keys.createKey", { apiId });
      t.equal(created.status, 200);
      await waitFor("the marker", 10_000, () => (receiver.of("key.created").length >= markers ? true : undefined));
      return receiver.received.filter((r) => CREDIT_EVENTS.includes(r.event.type));
    };
    const verify = (key: string) => h.call("keys.verifyKey", { key });

    await t.test("a key's own balance: low once, exhausted once, in 12 concurrent verifications of 5 credits", async (t) => {
      const { key, keyId } = (await h.call("keys.createKey", { apiId, credits: { remaining: 5, lowThreshold: 2 } })).body.data;
      const codes = (await Promise.all(Array.from({ length: 12 }, () => verify(key)))).map((r) => r.body.data.code);
      t.equal(codes.filter((code) => code === "VALID").length, 5);
      const got = await creditEvents(2);
      t.same(
        got.map((r) => [r.event.type, r.event.data.remaining]),
        [
          ["key.credits.low", 2],
          ["key.credits.exhausted", 0],
        ],
      );
      for (const r of got) {
        t.ok(verifySignature(secret, r.headers, r.body), "signed");
        t.match(r.event.data, { apiId, keyId, threshold: 2 });
        t.notOk(r.body.includes(key), "never the key");
      }

      await t.test("a top-up and a new crossing are told again", async (t) => {
        receiver.received.length = 0;
        t.equal((await h.call("keys.updateCredits", { keyId, operation: "increment", value: 3 })).status, 200);
        for (let i = 0; i < 4; i++) await verify(key);
        const again = await creditEvents(1);
        t.same(
          again.map((r) => r.event.type),
          ["key.credits.low", "key.credits.exhausted"],
        );
        t.same(
          receiver.of("key.updated").map((r) => r.event.data.keyId),
          [keyId],
          "the top-up itself is a key.updated",
        );
      });
    });

    await t.test("an identity's shared balance: identity.credits.* once each, for the keys that share it", async (t) => {
      receiver.received.length = 0;
      t.equal(
        (
          await h.call("identities.createIdentity", {
            externalId: `customer-${storage}`,
            credits: { remaining: 6, lowThreshold: 3 },
          })
        ).status,
        200,
      );
      const keys = await Promise.all(
        [1, 2, 3].map(async () => (await h.call("keys.createKey", { apiId, externalId: `customer-${storage}` })).body.data.key as string),
      );
      const codes = (await Promise.all(Array.from({ length: 15 }, (_, i) => verify(keys[i % 3] as string)))).map((r) => r.body.data.code);
      t.equal(codes.filter((code) => code === "VALID").length, 6, "the shared balance pays six");
      const got = await creditEvents(4);
      t.same(
        got.map((r) => [r.event.type, r.event.data.remaining]),
        [
          ["identity.credits.low", 3],
          ["identity.credits.exhausted", 0],
        ],
      );
      for (const r of got) t.match(r.event.data, { apiId, identityId: /^id_/, externalId: `customer-${storage}`, threshold: 3 });
    });
  });
}
