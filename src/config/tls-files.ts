import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createSecureContext, type SecureContextOptions } from "node:tls";
import { ConfigError } from "./config-error.js";
import { nonEmpty } from "./environment.js";
import type { KeygateConfig } from "./schema.js";

/** `server.tls`: the paths of the PEM files. */
export type TlsSettings = NonNullable<KeygateConfig["server"]["tls"]>;

/** What the server is given from the files (`setSecureContext` takes the same), and the certificate, for the log. */
export interface TlsCredentials {
  /** The certificate, then the intermediates of `ca` (the chain the server sends). */
  cert: string;
  key: string;
  /** The cipher suites offered (OpenSSL's list syntax, TLS 1.3's `TLS_` names included). */
  ciphers: string;
  certificate: X509Certificate;
}

/**
 * The suites offered by default: Mozilla's "intermediate" profile (version 5.7), AEAD only: TLS 1.3's three, and
 * for TLS 1.2 ECDHE (and DHE, when given parameters) with AES-GCM or ChaCha20-Poly1305. No CBC suite (LUCKY13 and
 * its kin), no RSA key exchange (no forward secrecy).
 */
export const DEFAULT_TLS_CIPHERS = [
  "TLS_AES_128_GCM_SHA256",
  "TLS_AES_256_GCM_SHA384",
  "TLS_CHACHA20_POLY1305_SHA256",
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
  "DHE-RSA-AES128-GCM-SHA256",
  "DHE-RSA-AES256-GCM-SHA384",
  "DHE-RSA-CHACHA20-POLY1305",
].join(":");

/** The options of the server's TLS context: the chain, its key, the suites, TLS 1.2 at least (whatever Node's flags say). */
export function secureContextOptions(credentials: Pick<TlsCredentials, "cert" | "key" | "ciphers">): SecureContextOptions {
  return { cert: credentials.cert, key: credentials.key, ciphers: credentials.ciphers, minVersion: "TLSv1.2" };
}

/** The variable that sets each field (environment.ts), named in a message when it was set. */
const VARIABLES = { cert: "KEYGATE_TLS_CERT", key: "KEYGATE_TLS_KEY", ca: "KEYGATE_TLS_CA" } as const;

const PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----";

export interface ReadTlsOptions {
  /** Where the configuration came from, for the message (the file, or "environment"). */
  source?: string;
  /** The environment the configuration was read with: a field one of its variables set is named with it. */
  env?: Record<string, string | undefined>;
}

/**
 * Reads and checks the files of `server.tls`: each must be readable, the certificate and `ca` PEM certificates, the
 * key an unencrypted PEM private key that belongs to the certificate. Throws a ConfigError whose one problem names
 * the field (and its variable, when that set it) and the file; Node's TLS would otherwise fail later, or with a
 * message naming neither. Paths are relative to the working directory.
 */
export function readTlsFiles(tls: TlsSettings, options: ReadTlsOptions = {}): TlsCredentials {
  const fail = (field: keyof typeof VARIABLES | "ciphers", problem: string): never => {
    const name = field === "ciphers" ? undefined : VARIABLES[field];
    const variable = name !== undefined && nonEmpty(options.env?.[name]) !== undefined ? ` (from ${name})` : "";
    throw new ConfigError(options.source ?? "server.tls", [`server.tls.${field}${variable}: ${problem}`]);
  };
  const read = (field: keyof typeof VARIABLES, path: string): string => {
    try {
      return readFileSync(path, "utf8");
    } catch (error) {
      return fail(field, `cannot read ${resolve(path)}: ${readProblem(error)}`);
    }
  };

  const certText = read("cert", tls.cert);
  const keyText = read("key", tls.key);
  const caText = tls.ca === undefined ? undefined : read("ca", tls.ca);
  if (!certText.includes(PEM_CERTIFICATE)) fail("cert", `${resolve(tls.cert)} is not a PEM certificate (no '${PEM_CERTIFICATE}' line)`);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certText);
  } catch (error) {
    return fail("cert", `${resolve(tls.cert)} holds no certificate that can be read (${(error as Error).message})`);
  }
  if (caText !== undefined && !caText.includes(PEM_CERTIFICATE)) {
    fail("ca", `${resolve(tls.ca as string)} is not a PEM file of CA certificates (no '${PEM_CERTIFICATE}' line)`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyText);
  } catch (error) {
    const code = (error as { code?: string }).code;
    return fail(
      "key",
      code === "ERR_MISSING_PASSPHRASE"
        ? `${resolve(tls.key)} is encrypted; give keygate the key without a passphrase`
        : `${resolve(tls.key)} is not a PEM private key`,
    );
  }
  if (!certificate.checkPrivateKey(key)) {
    fail("key", `${resolve(tls.key)} does not match the certificate in ${resolve(tls.cert)}`);
  }
  const ciphers = tls.ciphers ?? DEFAULT_TLS_CIPHERS;
  const credentials = { cert: caText === undefined ? certText : `${certText.trimEnd()}\n${caText}`, key: keyText, ciphers, certificate };
  // Anything else OpenSSL refuses (a broken intermediate, say) is found now rather than at the first handshake.
  try {
    createSecureContext({ cert: credentials.cert, key: credentials.key });
  } catch (error) {
    return fail(caText === undefined ? "cert" : "ca", `cannot be used: ${(error as Error).message}`);
  }
  try {
    createSecureContext(secureContextOptions(credentials));
  } catch (error) {
    return fail("ciphers", `'${ciphers}' names no cipher suite OpenSSL offers (${(error as Error).message})`);
  }
  return credentials;
}

/** What is logged of a certificate: enough to tell one from the next when it is rotated. */
export function describeCertificate(certificate: X509Certificate): Record<string, string> {
  return {
    subject: certificate.subject.replaceAll("\n", ", "),
    serialNumber: certificate.serialNumber,
    fingerprint256: certificate.fingerprint256,
    validTo: new Date(certificate.validTo).toISOString(),
  };
}

function readProblem(error: unknown): string {
  const code = (error as { code?: string }).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return (error as Error).message;
}
