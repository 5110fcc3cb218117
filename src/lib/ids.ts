import { randomFillSync } from "node:crypto";
import { base58Encode } from "./base58.js";

export type IdPrefix =
  | "key"
  | "api"
  | "ks"
  | "req"
  | "ws"
  | "role"
  | "perm"
  | "id"
  | "rl"
  | "rlns"
  | "rlor"
  | "rt"
  | "pol"
  | "wh"
  | "msg"
  | "pc"
  | "ps";

/** Seconds are counted from here so the time part fits 4 bytes for a long while. */
const ID_EPOCH_SECONDS = 1_700_000_000;

/**
 * Random bytes come from a pool refilled a few KB at a time: one call into the CSPRNG per ~500 ids instead of one
 * per id (a request id is made for every request, so this is on the hot path).
 */
const POOL_BYTES = 4_096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** The bytes of the id being made; reused (ids are made synchronously). */
const idBytes = new Uint8Array(12);

/**
 * `<prefix>_<base58 of 12 bytes>`: 4 bytes of seconds since ID_EPOCH_SECONDS, big-endian, then 8 random
 * bytes. Ids made in different seconds therefore sort by creation time, which keeps keyset pages stable.
 */
export function newId(prefix: IdPrefix, nowMs: number = Date.now()): string {
  const seconds = Math.max(0, Math.floor(nowMs / 1000) - ID_EPOCH_SECONDS);
  idBytes[0] = seconds >>> 24;
  idBytes[1] = seconds >>> 16;
  idBytes[2] = seconds >>> 8;
  idBytes[3] = seconds;
  if (poolOffset + 8 > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  for (let i = 0; i < 8; i++) idBytes[4 + i] = pool[poolOffset + i] as number;
  poolOffset += 8;
  return base58Encode(idBytes, `${prefix}_`);
}
