import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/** A secret (a recoverable key's plaintext) encrypted with AES-256-GCM under the operator's vault key. */
export interface EncryptedSecret {
  /** Which vault key encrypted it (first bytes of its SHA-256), to explain a failed decryption. */
  kid: string;
  iv: string;
  tag: string;
  data: string;
}

/**
 * Encrypts recoverable keys with AES-256-GCM under the operator's 32-byte vault key. Each secret is bound to a
 * context (workspace and key id) as additional authenticated data, so a ciphertext copied onto another key does
 * not decrypt.
 */
export class Vault {
  private readonly key: Buffer;
  /** Identifies the vault key without revealing it, so a secret sealed under another key can be explained. */
  readonly kid: string;

  constructor(keyBase64: string) {
    this.key = Buffer.from(keyBase64, "base64");
    if (this.key.length !== 32) throw new Error("the vault key must be 32 bytes");
    this.kid = createHash("sha256").update(this.key).digest("hex").slice(0, 16);
  }

  encrypt(plaintext: string, context: string): EncryptedSecret {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    cipher.setAAD(Buffer.from(context));
    const data = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return { kid: this.kid, iv: iv.toString("base64"), tag: cipher.getAuthTag().toString("base64"), data: data.toString("base64") };
  }

  /** Throws when the secret was sealed under another vault key or does not belong to `context`. */
  decrypt(secret: EncryptedSecret, context: string): string {
    if (secret.kid !== this.kid) throw new Error(`sealed under vault key ${secret.kid}, not the configured ${this.kid}`);
    const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(secret.iv, "base64"));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(Buffer.from(secret.tag, "base64"));
    return Buffer.concat([decipher.update(Buffer.from(secret.data, "base64")), decipher.final()]).toString("utf8");
  }
}
