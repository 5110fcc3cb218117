import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type ClientHttp2Session, connect as connectHttp2, type IncomingHttpHeaders } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as connectTls } from "node:tls";
import { fileURLToPath } from "node:url";
import { Agent, request as undiciRequest } from "undici";

/** The test CA and the certificates it signed (test/fixtures/tls/README.md says how they were made). */
export const TLS_FIXTURES = fileURLToPath(new URL("../../../test/fixtures/tls/", import.meta.url));
export const TEST_CA = readFileSync(join(TLS_FIXTURES, "ca.pem"));

/** The serial numbers of the fixtures' server certificates, as X509Certificate and getPeerCertificate write them. */
export const SERIAL = { 1: "03E9", 2: "03EA", 3: "03EB" } as const;

/** The paths of server certificate `n` (1, 2 or 3) and its key under test/fixtures/tls. */
export function fixture(n: 1 | 2 | 3): { cert: string; key: string } {
  return { cert: join(TLS_FIXTURES, `server-${n}.pem`), key: join(TLS_FIXTURES, `server-${n}-key.pem`) };
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A directory holding copies of server certificate `n` as cert.pem and key.pem (to rotate them), removed on teardown. */
export function certificateDirectory(t: Teardown, n: 1 | 2 | 3): { directory: string; cert: string; key: string } {
  const directory = mkdtempSync(join(tmpdir(), "keygate-tls-"));
  t.teardown(() => rmSync(directory, { recursive: true, force: true }));
  const files = { directory, cert: join(directory, "cert.pem"), key: join(directory, "key.pem") };
  installCertificate(files, n);
  return files;
}

/** Copies server certificate `n` and its key over the files at `into`. */
export function installCertificate(into: { cert: string; key: string }, n: 1 | 2 | 3): void {
  copyFileSync(fixture(n).key, into.key);
  copyFileSync(fixture(n).cert, into.cert);
}

/** A TLS handshake with `localhost:port` offering `alpn`: the protocol chosen and the certificate's serial number. */
export function handshake(port: number, alpn: string[] = ["h2", "http/1.1"]): Promise<{ protocol: string | false; serial: string }> {
  return new Promise((resolve, reject) => {
    const socket = connectTls({ host: "127.0.0.1", port, servername: "localhost", ca: TEST_CA, ALPNProtocols: alpn }, () => {
      const result = { protocol: socket.alpnProtocol ?? false, serial: socket.getPeerCertificate().serialNumber };
      socket.end();
      resolve(result);
    });
    socket.once("error", reject);
  });
}

/** An HTTP/2 connection to `localhost:port` trusting the test CA; closed on teardown. */
export async function http2Session(t: Teardown, port: number): Promise<ClientHttp2Session> {
  const session = connectHttp2(`https://localhost:${port}`, { ca: TEST_CA });
  t.teardown(() => session.destroy());
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  return session;
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body as JSON (throws when it is not). */
  json(): any;
}

/**
 * One request on an HTTP/2 session: `headers` without the pseudo-headers but `:method` and `:path` (given apart),
 * and a body written whole, or chunk by chunk (no Content-Length) when it is an array.
 */
export function http2Call(
  session: ClientHttp2Session,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string | Buffer | Buffer[] } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = options.body;
    const stream = session.request(
      { ":method": method, ":path": path, ...options.headers },
      { endStream: body === undefined || (Array.isArray(body) && body.length === 0) },
    );
    const chunks: Buffer[] = [];
    let headers: IncomingHttpHeaders = {};
    stream.once("response", (received) => (headers = received));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve({ status: Number(headers[":status"]), headers, text, json: () => JSON.parse(text) });
    });
    stream.once("error", reject);
    if (Array.isArray(body)) {
      const pieces = [...body];
      const next = () => {
        const piece = pieces.shift();
        if (piece === undefined) return void stream.end();
        stream.write(piece, () => setImmediate(next));
      };
      if (pieces.length > 0) next();
    } else if (body !== undefined) stream.end(body);
  });
}

/** undici, trusting the test CA: HTTP/1.1 over TLS (undici offers no h2 unless asked). Closed on teardown. */
export function https11(
  t: Teardown,
): (url: string, options?: { method?: string; headers?: Record<string, string>; body?: string | Buffer }) => Promise<Answer> {
  const agent = new Agent({ connect: { ca: TEST_CA, servername: "localhost" } });
  t.teardown(() => agent.close());
  return async (url, options = {}) => {
    const response = await undiciRequest(url, {
      dispatcher: agent,
      method: (options.method ?? "GET") as "GET",
      headers: options.headers ?? {},
      body: options.body ?? null,
    });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers as IncomingHttpHeaders, text, json: () => JSON.parse(text) };
  };
}
