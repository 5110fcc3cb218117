import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";
import t from "tap";
import { ANALYTICS_DEFAULTS, DEFAULTS } from "../../src/config/defaults.js";
import {
  chain,
  configurationIn,
  environmentOf,
  execForm,
  lastOf,
  REPOSITORY,
  readDockerfile,
  repositoryFile,
  stageNamed,
} from "../helpers/deploy.js";

// The Dockerfile read as a builder reads it. .ci/image/check builds and runs it; these checks say quickly, and
// without podman, what a change to the build, the configuration or the package would break in it.

const dockerfile = readDockerfile();
const pkg = JSON.parse(repositoryFile("package.json")) as { scripts: Record<string, string>; engines: { node: string } };
const ignored = repositoryFile(".dockerignore")
  .split("\n")
  .map((line) => line.trim())
  .filter((line) => line !== "" && !line.startsWith("#"));

/**
 * The files `npm run build` reads besides the dependencies: named in the script, tsconfig.build.json's, and the
 * top-level folders the pages Vite builds import from outside their own (the shared ui/).
 */
function buildInputs(): string[] {
  const script = pkg.scripts.build as string;
  const named = [...script.matchAll(/(?:-p|--config|node)\s+([\w./-]+\.(?:json|mjs|js))/g)].map((match) => match[1] as string);
  const tsconfig = JSON.parse(repositoryFile("tsconfig.build.json")) as { extends?: string; include?: string[] };
  const included = (tsconfig.include ?? []).map((pattern) => pattern.split("/")[0] as string);
  const pages = named.filter((file) => file.endsWith("vite.config.mjs")).map((file) => posix.dirname(file));
  return [...named, ...(tsconfig.extends ? [tsconfig.extends.replace(/^\.\//, "")] : []), ...included, ...importedFolders(pages)];
}

/** Top-level folders that the sources under `roots` import by a relative path leaving their own folder. */
function importedFolders(roots: readonly string[]): string[] {
  const folders = new Set<string>();
  for (const root of roots) {
    for (const entry of readdirSync(join(REPOSITORY, root, "src"), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !/\.(tsx?|css)$/.test(entry.name)) continue;
      const file = join(entry.parentPath, entry.name);
      for (const match of readFileSync(file, "utf8").matchAll(/(?:from|import)\s+"(\.\.\/[^"]+)"/g)) {
        const target = posix.relative(REPOSITORY, posix.resolve(posix.dirname(file), match[1] as string));
        const top = target.split("/")[0] as string;
        if (top !== root && top !== ".." && top !== "src") folders.add(top);
      }
    }
  }
  return [...folders];
}

t.test("the build stage copies every file the build reads", async (t) => {
  const build = stageNamed(dockerfile, "build");
  const runBuild = build.instructions.findIndex(
    (instruction) => instruction.keyword === "RUN" && instruction.text.includes("npm run build"),
  );
  t.ok(runBuild > 0, "the build stage runs npm run build");
  const copied = build.instructions
    .slice(0, runBuild)
    .filter((instruction) => instruction.keyword === "COPY")
    .flatMap((instruction) => instruction.text.split(/\s+/).slice(0, -1));
  const inputs = buildInputs();
  t.ok(
    inputs.includes("portal/vite.config.mjs") && inputs.includes("src") && inputs.includes("ui"),
    `the build's inputs: ${inputs.join(", ")}`,
  );
  for (const input of inputs) {
    t.ok(existsSync(join(REPOSITORY, input)), `${input} exists`);
    const copy = copied.find((source) => input === source || input.startsWith(`${source}/`));
    t.ok(copy, `${input} is copied before the build`);
  }
});

t.test("every file copied from the build context exists and is not left out of it", async (t) => {
  const sources = dockerfile.stages
    .flatMap((stage) => stage.instructions)
    .filter((instruction) => instruction.keyword === "COPY" && !instruction.text.includes("--from="))
    .flatMap((instruction) =>
      instruction.text
        .split(/\s+/)
        .filter((word) => !word.startsWith("--"))
        .slice(0, -1),
    );
  t.ok(sources.includes("config/keygate.example.yaml"), sources.join(", "));
  for (const source of sources) {
    t.ok(existsSync(join(REPOSITORY, source)), `${source} exists`);
    t.notOk(ignored.includes(source.split("/")[0] as string) || ignored.includes(source), `${source} is in the build context`);
  }
});

t.test("two targets: the slim image by default, without chDB, and embedded, with it", async (t) => {
  const names = dockerfile.stages.map((stage) => stage.name);
  t.equal(names.at(-1), "slim", "the last stage, what a build without --target makes, is the slim image");
  t.ok(names.includes("embedded"), "--target embedded");
  const modulesFrom = (target: string) => {
    const copy = chain(dockerfile, stageNamed(dockerfile, target)).find(
      (instruction) => instruction.keyword === "COPY" && instruction.text.endsWith(" ./node_modules"),
    );
    const from = /--from=(\S+)/.exec(copy?.text ?? "")?.[1] ?? "";
    return chain(dockerfile, stageNamed(dockerfile, from))
      .filter((instruction) => instruction.keyword === "RUN" && instruction.text.startsWith("npm prune"))
      .map((instruction) => instruction.text)
      .join(" ");
  };
  t.match(modulesFrom("slim"), /--omit=dev.*--omit=optional/, "slim: production dependencies without the optional chDB");
  t.match(modulesFrom("embedded"), /--omit=dev/, "embedded: production dependencies");
  t.notMatch(modulesFrom("embedded"), /--omit=optional/, "embedded: chDB kept");
});

t.test("the runtime holds the compiled code and its dependencies, no sources, tests or build tools", async (t) => {
  for (const target of ["slim", "embedded"]) {
    const sources = chain(dockerfile, stageNamed(dockerfile, target))
      .filter((instruction) => instruction.keyword === "COPY")
      .map((instruction) => instruction.text.split(/\s+/).filter((word) => !word.startsWith("--")))
      .map((words) => words.slice(0, -1).join(" "));
    t.same(
      sources,
      ["package.json", "config/keygate.example.yaml", "/app/dist", "/app/node_modules"],
      `${target}: package.json (the module type), the example configuration, dist/ and node_modules/`,
    );
  }
});

t.test("the slim image's default configuration starts without chDB; the embedded one records analytics", async (t) => {
  const slim = configurationIn(environmentOf(chain(dockerfile, stageNamed(dockerfile, "slim"))));
  t.equal(slim.analytics.engine, "off", "the slim image: analytics off unless a ClickHouse server is named");
  const embedded = configurationIn(environmentOf(chain(dockerfile, stageNamed(dockerfile, "embedded"))));
  t.equal(embedded.analytics.engine, "embedded");
  const clickhouse = configurationIn({
    ...environmentOf(chain(dockerfile, stageNamed(dockerfile, "slim"))),
    KEYGATE_ANALYTICS_ENGINE: "clickhouse",
    KEYGATE_CLICKHOUSE_URL: "http://clickhouse:8123",
  });
  t.equal(clickhouse.analytics.clickhouse.url, "http://clickhouse:8123", "a ClickHouse server by the environment");
});

t.test("it runs as an unprivileged user by number, writes only its volume, and serves on the port it exposes", async (t) => {
  const runtime = chain(dockerfile, stageNamed(dockerfile, "slim"));
  const user = lastOf(runtime, "USER") ?? "";
  t.match(user, /^[1-9]\d*:\d+$/, "uid:gid, not root, by number (Kubernetes' runAsNonRoot checks a number)");
  const workdir = lastOf(runtime, "WORKDIR") ?? "";
  const volume = lastOf(runtime, "VOLUME") ?? "";
  t.equal(volume, "/app/data");
  t.ok(posix.resolve(workdir, ANALYTICS_DEFAULTS.path).startsWith(`${volume}/`), "the embedded engine's default path is on the volume");
  t.ok(posix.resolve(workdir, "data/bootstrap-root-key").startsWith(`${volume}/`), "so is the bootstrap root key");
  const env = environmentOf(runtime);
  t.equal(lastOf(runtime, "EXPOSE"), env.PORT, "EXPOSE is the port keygate listens on");
  t.equal(configurationIn(env).server.port, Number(env.PORT));
  t.equal(DEFAULTS.port, Number(env.PORT), "the same as keygate's own default");
  t.same(execForm(runtime, "ENTRYPOINT"), ["/usr/bin/tini", "--"], "tini is PID 1 and passes signals on");
  t.same(execForm(runtime, "CMD").at(-1), "dist/server.js");
  t.match(lastOf(runtime, "HEALTHCHECK") ?? "", /\/v2\/liveness/, "the Docker health check asks /v2/liveness");
});

t.test("the image's Node major satisfies package.json's engines", async (t) => {
  const major = Number(dockerfile.args.get("NODE_MAJOR"));
  const minimum = Number(/>=\s*(\d+)/.exec(pkg.engines.node)?.[1]);
  t.ok(major >= minimum, `Node ${major} (engines: ${pkg.engines.node})`);
  for (const stage of dockerfile.stages.filter((stage) => stage.from.startsWith("node:")))
    t.match(stage.from, /^node:\$\{NODE_MAJOR\}-bookworm-slim$/, `${stage.name}: the one base, of NODE_MAJOR`);
});
