import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";

/**
 * Reads one of an upstream's TLS files when its route is compiled (a start-up or reload error for the configuration
 * file's routes, a 400 for the API's), and checks it holds what its field says: a CA or client certificate, or a
 * private key, in PEM. Its text is never put in a message.
 */
export function readUpstreamTlsFile(path: string, kind: "ca" | "cert" | "key"): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`cannot be read (${(error as NodeJS.ErrnoException).code ?? "unknown error"})`);
  }
  try {
    if (kind === "key") createPrivateKey(text);
    else new X509Certificate(text);
  } catch {
    throw new Error(kind === "key" ? "is not a PEM private key" : "is not a PEM certificate");
  }
  return text;
}
