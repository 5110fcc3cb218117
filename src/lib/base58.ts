/** Bitcoin's Base58 alphabet: no 0, O, I or l. It is in ASCII order, so equal-length encodings sort like their numbers. */
const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/** Base58 digits of the number being encoded, least significant first; reused (encoding is synchronous). */
let digits = new Uint8Array(64);

export function base58Encode(bytes: Uint8Array): string {
  // Repeated division of the big-endian number by 58; leading zero bytes become leading '1's. A byte needs at most
  // log(256)/log(58) < 1.37 digits.
  if (digits.length < bytes.length * 2) digits = new Uint8Array(bytes.length * 2);
  let length = 0;
  for (let at = 0; at < bytes.length; at++) {
    let carry = bytes[at] as number;
    for (let i = 0; i < length; i++) {
      carry += (digits[i] as number) << 8;
      digits[i] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry > 0) {
      digits[length++] = carry % 58;
      carry = (carry / 58) | 0;
    }
  }
  let out = "";
  for (let i = 0; i < bytes.length && bytes[i] === 0; i++) out += "1";
  for (let i = length - 1; i >= 0; i--) out += ALPHABET[digits[i] as number];
  return out;
}
