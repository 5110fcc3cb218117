import t from "tap";
import { base58Encode } from "../../src/lib/base58.js";
import { hashKey } from "../../src/lib/hash.js";
import { newId } from "../../src/lib/ids.js";

t.test("base58 encodes with Bitcoin's alphabet, leading zero bytes as 1", async (t) => {
  t.equal(base58Encode(Buffer.from("hello world")), "StV1DL6CwTryKyV");
  t.equal(base58Encode(Buffer.from([0, 0, 1])), "112");
  t.equal(base58Encode(Buffer.alloc(0)), "");
});

/** Base58 the slow and obvious way, to check the encoder against. */
function base58ByBigInt(bytes: Uint8Array): string {
  const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  let number = 0n;
  for (const byte of bytes) number = number * 256n + BigInt(byte);
  let out = "";
  while (number > 0n) {
    out = (alphabet[Number(number % 58n)] as string) + out;
    number /= 58n;
  }
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  return "1".repeat(zeros) + out;
}

t.test("base58 agrees with a reference encoder for inputs of every length used, one after another", async (t) => {
  let seed = 7;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed % 256;
  };
  // Long and short inputs alternate, so a digit left over from a longer one would show in a shorter one.
  for (const length of [12, 64, 1, 12, 100, 3, 32, 12, 0, 16]) {
    const bytes = Uint8Array.from({ length }, random);
    if (length > 4) bytes[0] = 0;
    t.equal(base58Encode(bytes), base58ByBigInt(bytes), `${length} bytes`);
  }
});

t.test("base58 agrees with the reference at every length up to 70 bytes, with leading zeros and all-0xff bytes", async (t) => {
  let seed = 11;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed % 256;
  };
  for (let length = 0; length <= 70; length++) {
    const bytes = Uint8Array.from({ length }, random);
    t.equal(base58Encode(bytes), base58ByBigInt(bytes), `${length} random bytes`);
    const leadingZeros = bytes.map((byte, index) => (index < 3 ? 0 : byte));
    t.equal(base58Encode(leadingZeros), base58ByBigInt(leadingZeros), `${length} bytes, the first three zero`);
    const largest = new Uint8Array(length).fill(0xff);
    t.equal(base58Encode(largest), base58ByBigInt(largest), `${length} bytes of 0xff`);
  }
});

t.test("base58 writes a prefix in front of the encoding", async (t) => {
  t.equal(base58Encode(Buffer.from("hello world"), "req_"), "req_StV1DL6CwTryKyV");
  t.equal(base58Encode(Buffer.from([0, 0, 1]), "key_"), "key_112");
  t.equal(base58Encode(Buffer.alloc(0), "x_"), "x_");
});

t.test("ids carry their prefix and sort by creation second", async (t) => {
  const early = newId("key", Date.UTC(2026, 0, 1));
  const late = newId("key", Date.UTC(2026, 0, 1, 0, 0, 1));
  t.match(early, /^key_[1-9A-HJ-NP-Za-km-z]{16,17}$/);
  t.ok(early < late);
  t.not(newId("api"), newId("api"));
});

t.test("an id's first 4 bytes are its second since the id epoch, the other 8 differ from id to id", async (t) => {
  const at = Date.UTC(2026, 5, 1, 12, 0, 0);
  const decode = (id: string) => {
    const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let number = 0n;
    for (const char of id.slice(id.indexOf("_") + 1)) number = number * 58n + BigInt(alphabet.indexOf(char));
    return { seconds: Number(number >> 64n), random: number & (2n ** 64n - 1n) };
  };
  const ids = Array.from({ length: 1_000 }, () => decode(newId("req", at)));
  t.ok(ids.every((id) => id.seconds === at / 1000 - 1_700_000_000));
  t.equal(new Set(ids.map((id) => id.random)).size, ids.length);
});

t.test("key hashes are base64 SHA-256, as Unkey stores them", async (t) => {
  t.equal(hashKey("abc"), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
});
