/** Bitcoin's Base58 alphabet: no 0, O, I or l. It is in ASCII order, so equal-length encodings sort like their numbers. */
const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const DIGIT_CODES = Uint8Array.from(ALPHABET, (char) => char.charCodeAt(0));
const ZERO_DIGIT = DIGIT_CODES[0] as number;

/**
 * The number is divided in limbs of 16 bits, six base58 digits per pass: a remainder below 58^6 times 2^16, plus a
 * limb, stays below 2^53, so every step is exact in double arithmetic.
 */
const LIMB = 0x1_0000;
const DIGITS_PER_PASS = 6;
const PASS_DIVISOR = 58 ** DIGITS_PER_PASS;
/** Base58 needs at most log(256)/log(58) < 1.366 digits per byte. */
const DIGITS_PER_BYTE = 1.366;

/**
 * Base58 of `bytes`, big-endian; leading zero bytes become leading '1's. `prefix` (ASCII) is written in front, in the
 * same string: one flat string, which is what ids are used as (map keys, headers, analytics rows) without being
 * copied again.
 */
export function base58Encode(bytes: Uint8Array, prefix = ""): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const significant = bytes.length - zeros;
  const limbCount = (significant + 1) >> 1;
  // Fresh for each call: the bytes may be key material, which must not linger in memory shared between calls.
  const limbs = new Float64Array(limbCount);
  for (let limb = limbCount - 1, at = bytes.length - 1; limb >= 0; limb--) {
    const low = bytes[at--] as number;
    const high = at >= zeros ? (bytes[at--] as number) : 0;
    limbs[limb] = high * 256 + low;
  }

  // Digits are written right to left, least significant first, ending at `end`.
  const end = prefix.length + zeros + Math.ceil(significant * DIGITS_PER_BYTE) + DIGITS_PER_PASS;
  const characters = Buffer.alloc(end);
  let start = end;
  for (let first = 0; first < limbCount; ) {
    let remainder = 0;
    for (let limb = first; limb < limbCount; limb++) {
      const current = remainder * LIMB + (limbs[limb] as number);
      const quotient = Math.floor(current / PASS_DIVISOR);
      limbs[limb] = quotient;
      remainder = current - quotient * PASS_DIVISOR;
    }
    while (first < limbCount && limbs[first] === 0) first++;
    for (let digit = 0; digit < DIGITS_PER_PASS; digit++) {
      const quotient = Math.floor(remainder / 58);
      characters[--start] = DIGIT_CODES[remainder - quotient * 58] as number;
      remainder = quotient;
    }
  }
  // The last pass wrote six digits whatever the number's size: its leading zero digits are not part of the number.
  while (start < end && characters[start] === ZERO_DIGIT) start++;
  for (let zero = 0; zero < zeros; zero++) characters[--start] = ZERO_DIGIT;
  for (let at = prefix.length - 1; at >= 0; at--) characters[--start] = prefix.charCodeAt(at);
  return characters.toString("latin1", start, end);
}
