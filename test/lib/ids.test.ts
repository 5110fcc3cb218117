import t from "tap";
import { base58Encode } from "../../src/lib/base58.js";
import { hashKey } from "../../src/lib/hash.js";
import { newId } from "../../src/lib/ids.js";

t.test("base58 encodes with Bitcoin's alphabet, leading zero bytes as 1", async (t) => {
  t.equal(base58Encode(Buffer.from("hello world")), "StV1DL6CwTryKyV");
  t.equal(base58Encode(Buffer.from([0, 0, 1])), "112");
  t.equal(base58Encode(Buffer.alloc(0)), "");
});

t.test("ids carry their prefix and sort by creation second", async (t) => {
  const early = newId("key", Date.UTC(2026, 0, 1));
  const late = newId("key", Date.UTC(2026, 0, 1, 0, 0, 1));
  t.match(early, /^key_[1-9A-HJ-NP-Za-km-z]{16,17}$/);
  t.ok(early < late);
  t.not(newId("api"), newId("api"));
});

t.test("key hashes are base64 SHA-256, as Unkey stores them", async (t) => {
  t.equal(hashKey("abc"), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
});
