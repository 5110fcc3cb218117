import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Agent } from "undici";

/**
 * `server.tls` of a keygate under load (--tls on): the test certificate for localhost and its CA, from
 * test/fixtures/tls. The load generators do not verify certificates; the driver's own calls trust the CA.
 */
const FIXTURES = fileURLToPath(new URL("../../../test/fixtures/tls/", import.meta.url));

export const BENCH_TLS = { cert: `${FIXTURES}server-1.pem`, key: `${FIXTURES}server-1-key.pem` };

/** An undici dispatcher that trusts the test CA (for the driver's calls to a keygate over HTTPS). */
export function trustingTestCa(): Agent {
  return new Agent({ connect: { ca: readFileSync(`${FIXTURES}ca.pem`), servername: "localhost" } });
}
