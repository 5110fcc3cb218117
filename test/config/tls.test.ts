import { join } from "node:path";
import t from "tap";
import { buildApp } from "../../src/app.js";
import { ConfigError, loadConfig, validateConfig } from "../../src/config/load.js";
import { readTlsFiles } from "../../src/config/tls-files.js";
import { directoryWith, problemsOf } from "../helpers/config.js";
import { run, SERVER_ENTRY } from "../helpers/process.js";
import { fixture, SERIAL, TLS_FIXTURES } from "../helpers/tls.js";

const NOT_PEM = join(TLS_FIXTURES, "not-pem.txt");
const MISSING = join(TLS_FIXTURES, "missing.pem");

t.test("server.tls comes from the file or from KEYGATE_TLS_CERT, KEYGATE_TLS_KEY and KEYGATE_TLS_CA", async (t) => {
  const cwd = directoryWith({ "config/keygate.yaml": "server: { tls: { cert: file-cert.pem, key: file-key.pem } }\n" });
  t.same(loadConfig({ env: {}, cwd }).server.tls, { cert: "file-cert.pem", key: "file-key.pem" });
  t.same(loadConfig({ env: { KEYGATE_TLS_CERT: "env-cert.pem", KEYGATE_TLS_CA: "env-ca.pem" }, cwd }).server.tls, {
    cert: "env-cert.pem",
    key: "file-key.pem",
    ca: "env-ca.pem",
  });
  t.same(loadConfig({ env: { KEYGATE_TLS_CERT: "c.pem", KEYGATE_TLS_KEY: "k.pem" }, cwd: directoryWith({}) }).server.tls, {
    cert: "c.pem",
    key: "k.pem",
  });
  t.equal(loadConfig({ env: {}, cwd: directoryWith({}) }).server.tls, undefined, "plain HTTP unless asked");
  t.same(
    problemsOf(() => loadConfig({ env: { KEYGATE_TLS_CERT: "c.pem" }, cwd: directoryWith({}) })),
    ["server.tls.key: is required"],
    "a certificate needs its key",
  );
  t.same(
    problemsOf(() =>
      loadConfig({ env: { KEYGATE_TLS_KEY: "k.pem" }, cwd: directoryWith({ "config/keygate.yaml": "server: { tls: yes }\n" }) }),
    ),
    ["server.tls: must be an object"],
  );
});

t.test("files that cannot be used are refused with one line naming the field and the file", async (t) => {
  const both = fixture(1);
  t.equal(readTlsFiles(both).certificate.serialNumber, SERIAL[1], "a certificate and its key");
  t.same(
    problemsOf(() => readTlsFiles({ ...both, cert: MISSING })),
    [`server.tls.cert: cannot read ${MISSING}: no such file`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, key: TLS_FIXTURES.replace(/\/$/, "") })),
    [`server.tls.key: cannot read ${TLS_FIXTURES.replace(/\/$/, "")}: it is a directory`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, key: fixture(2).key })),
    [`server.tls.key: ${fixture(2).key} does not match the certificate in ${both.cert}`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, cert: NOT_PEM })),
    [`server.tls.cert: ${NOT_PEM} is not a PEM certificate (no '-----BEGIN CERTIFICATE-----' line)`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, cert: both.key })),
    [`server.tls.cert: ${both.key} is not a PEM certificate (no '-----BEGIN CERTIFICATE-----' line)`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, key: NOT_PEM })),
    [`server.tls.key: ${NOT_PEM} is not a PEM private key`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, key: both.cert })),
    [`server.tls.key: ${both.cert} is not a PEM private key`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, ca: NOT_PEM })),
    [`server.tls.ca: ${NOT_PEM} is not a PEM file of CA certificates (no '-----BEGIN CERTIFICATE-----' line)`],
  );
  t.same(
    problemsOf(() => readTlsFiles({ ...both, key: MISSING }, { env: { KEYGATE_TLS_KEY: MISSING } })),
    [`server.tls.key (from KEYGATE_TLS_KEY): cannot read ${MISSING}: no such file`],
    "a field an environment variable set is named with it",
  );
  t.same(
    problemsOf(() => readTlsFiles({ cert: "nope.pem", key: "nope-key.pem" })),
    [`server.tls.cert: cannot read ${join(process.cwd(), "nope.pem")}: no such file`],
    "a relative path is read from the working directory, and named in full",
  );
});

t.test("buildApp refuses such files before it opens anything", async (t) => {
  const config = validateConfig({ server: { tls: { ...fixture(1), key: fixture(2).key } }, analytics: { engine: "off" } });
  await t.rejects(buildApp(config, { logger: false }), ConfigError);
});

t.test("keygate does not start on them: one line on stderr, exit status 1", async (t) => {
  const cases: [string, Record<string, string>, string][] = [
    [
      "a missing file",
      { KEYGATE_TLS_CERT: MISSING, KEYGATE_TLS_KEY: fixture(1).key },
      `server.tls.cert (from KEYGATE_TLS_CERT): cannot read ${MISSING}: no such file`,
    ],
    [
      "a key of another certificate",
      { KEYGATE_TLS_CERT: fixture(1).cert, KEYGATE_TLS_KEY: fixture(2).key },
      `server.tls.key (from KEYGATE_TLS_KEY): ${fixture(2).key} does not match the certificate in ${fixture(1).cert}`,
    ],
    [
      "a file that is not PEM",
      { KEYGATE_TLS_CERT: fixture(1).cert, KEYGATE_TLS_KEY: NOT_PEM },
      `server.tls.key (from KEYGATE_TLS_KEY): ${NOT_PEM} is not a PEM private key`,
    ],
  ];
  for (const [what, env, line] of cases) {
    const result = await run(SERVER_ENTRY, [], { ...env, PORT: "0", KEYGATE_ANALYTICS_ENGINE: "off" });
    t.equal(result.code, 1, what);
    t.equal(result.stderr, `keygate: invalid configuration (environment):\n  - ${line}\n`, what);
    t.equal(result.stdout, "", "nothing was started");
  }
});
