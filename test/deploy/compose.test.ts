import t from "tap";
import { parse } from "yaml";
import {
  chain,
  configurationIn,
  documentedVariables,
  environmentOf,
  lastOf,
  readDockerfile,
  repositoryFile,
  stageNamed,
} from "../helpers/deploy.js";

// docker-compose.yml read as Compose reads it, checked against the Dockerfile and keygate's configuration.

interface Service {
  image?: string;
  build?: string | { context: string; target?: string };
  profiles?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: string[] | Record<string, { condition: string; required?: boolean }>;
  read_only?: boolean;
  tmpfs?: string[];
}

const compose = parse(repositoryFile("docker-compose.yml"), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const dockerfile = readDockerfile();
const keygates = Object.entries(services).filter(([, service]) => service.build !== undefined);

/** A value as Compose gives it with nothing set in the shell: `${X:-default}` its default, `${X:?message}` `x`. */
function interpolated(value: string, shell: Record<string, string> = {}): string {
  return value.replace(/\$\{(\w+)(?::([-?])([^}]*))?\}/g, (_, name: string, kind: string | undefined, rest: string) => {
    const given = shell[name];
    if (given !== undefined) return given;
    if (kind === "-") return rest;
    if (kind === "?") return `${name.toLowerCase()}-from-the-shell`;
    return "";
  });
}

function environment(service: Service, shell: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([name, value]) => [name, interpolated(String(value), shell)]));
}

/** The repository files a service mounts, by their path inside the container. */
function mountedFiles(service: Service): Record<string, string> {
  return Object.fromEntries(
    (service.volumes ?? [])
      .filter((volume) => volume.startsWith("./"))
      .map((volume) => {
        const [from = "", to = ""] = volume.split(":");
        return [to, repositoryFile(from)];
      }),
  );
}

function dependencies(service: Service): string[] {
  const named = service.depends_on ?? [];
  return Array.isArray(named) ? named : Object.keys(named);
}

function targetOf(service: Service): string {
  const build = service.build;
  const target = typeof build === "object" ? build.target : undefined;
  return target ?? (dockerfile.stages.at(-1)?.name as string);
}

t.test("keygate, Redis and an optional ClickHouse, and the examples beside them", async (t) => {
  t.ok(services.keygate?.build, "keygate is built from the Dockerfile");
  t.match(services.redis?.image, /^redis:/);
  t.same(services.clickhouse?.profiles, ["clickhouse"], "ClickHouse only with --profile clickhouse");
  t.match(services.clickhouse?.image, /^clickhouse\/clickhouse-server:(\d+)\.(\d+)$/);
  const [, major = "0", minor = "0"] = /:(\d+)\.(\d+)$/.exec(services.clickhouse?.image ?? "") ?? [];
  t.ok(Number(major) * 100 + Number(minor) >= 2403, "ClickHouse 24.3 or newer, as keygate needs");
  for (const [name, service] of Object.entries(services))
    for (const dependency of dependencies(service)) t.ok(services[dependency], `${name} depends on ${dependency}, a service`);
});

t.test("every keygate service runs an image target with the environment keygate reads and a valid configuration", async (t) => {
  const variables = documentedVariables();
  t.ok(keygates.length >= 2, keygates.map(([name]) => name).join(", "));
  for (const [name, service] of keygates) {
    const build = service.build;
    t.equal(typeof build === "object" ? build.context : build, ".", `${name}: the repository's Dockerfile`);
    const target = targetOf(service);
    t.ok(
      dockerfile.stages.some((stage) => stage.name === target),
      `${name}: target ${target}`,
    );
    for (const variable of Object.keys(service.environment ?? {})) t.ok(variables.has(variable), `${name}: keygate reads ${variable}`);
    const image = environmentOf(chain(dockerfile, stageNamed(dockerfile, target)));
    const config = configurationIn({ ...image, ...environment(service) }, mountedFiles(service));
    t.ok(target === "embedded" || config.analytics.engine !== "embedded", `${name}: no embedded engine asked of the ${target} image`);
    t.ok(config.rootKeys.length > 0, `${name}: a root key from the environment`);
    const redis = config.storage.redis;
    const urls = redis?.url ? [redis.url] : (redis?.cluster?.nodes ?? []);
    t.ok(urls.length > 0, `${name}: Redis stores`);
    for (const url of urls) t.ok(services[new URL(url).hostname], `${name}: Redis at ${url}, a service`);
  }
});

t.test("with KEYGATE_ANALYTICS_ENGINE=clickhouse in the shell, keygate records analytics in the ClickHouse service", async (t) => {
  const keygate = services.keygate as Service;
  const image = environmentOf(chain(dockerfile, stageNamed(dockerfile, targetOf(keygate))));
  t.equal(configurationIn({ ...image, ...environment(keygate) }, mountedFiles(keygate)).analytics.engine, "off", "off by default");
  const config = configurationIn({ ...image, ...environment(keygate, { KEYGATE_ANALYTICS_ENGINE: "clickhouse" }) }, mountedFiles(keygate));
  t.equal(config.analytics.engine, "clickhouse");
  const url = new URL(config.analytics.clickhouse.url as string);
  t.ok(services[url.hostname], `${url.hostname} is a service`);
  t.equal(url.port, "8123", "ClickHouse's HTTP interface");
  const clickhouse = environment(services.clickhouse as Service);
  t.equal(config.analytics.clickhouse.username, clickhouse.CLICKHOUSE_USER);
  t.equal(config.analytics.clickhouse.password, clickhouse.CLICKHOUSE_PASSWORD, "one password");
  t.equal(keygate.environment?.KEYGATE_CLICKHOUSE_PASSWORD, services.clickhouse?.environment?.CLICKHOUSE_PASSWORD, "the same variable");
  t.same(
    (keygate.depends_on as Record<string, unknown>).clickhouse,
    { condition: "service_healthy", required: false },
    "waited for with its profile only",
  );
  t.match(services.clickhouse?.healthcheck?.test.join(" "), /:8123\/ping/);
});

t.test("keygate runs as in a sidecar: read-only root, /tmp and its volume writable, the image's port, a readiness check", async (t) => {
  const keygate = services.keygate as Service;
  const runtime = chain(dockerfile, stageNamed(dockerfile, targetOf(keygate)));
  const port = environmentOf(runtime).PORT;
  t.equal(keygate.read_only, true);
  t.same(keygate.tmpfs, ["/tmp"]);
  t.ok(
    keygate.volumes?.some((volume) => volume.split(":")[1]?.split(/\s/)[0] === lastOf(runtime, "VOLUME")),
    "a named volume on the image's VOLUME",
  );
  t.ok(
    keygate.ports?.some((mapping) => mapping.endsWith(`:${port}`)),
    `the image's port ${port} published`,
  );
  const check = keygate.healthcheck?.test.join(" ") ?? "";
  t.match(check, new RegExp(`127\\.0\\.0\\.1:${port}/v2/readiness`), "ready when Redis answers and analytics is open");
  const cluster = services["keygate-cluster"] as Service;
  t.equal(cluster.read_only, true);
  t.same(cluster.tmpfs, ["/tmp"]);
});
