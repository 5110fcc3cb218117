import { readdirSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { parseAllDocuments } from "yaml";
import type { KeygateConfig } from "../../src/config/schema.js";
import {
  chain,
  configurationIn,
  documentedVariables,
  environmentOf,
  lastOf,
  REPOSITORY,
  readDockerfile,
  repositoryFile,
  stageNamed,
} from "../helpers/deploy.js";

// The Kubernetes examples in deploy/kubernetes/: every object valid against the Kubernetes API's schemas
// (kubernetes-models), and keygate's containers, probes, Services and the ingress-nginx forward-auth annotations
// consistent with the image and keygate's configuration.

/** The forward-auth door's path (gateway.forwardAuth.path's default, issue 50). */
const FORWARD_AUTH_PATH = "/_keygate/auth";

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  // The objects' shapes are the schemas' to check: the tests read the fields they need.
  spec?: any;
  data?: Record<string, string>;
}

interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: Record<string, unknown>;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
}

interface Volume {
  name: string;
  configMap?: { name: string };
  emptyDir?: Record<string, unknown>;
}

interface Probe {
  httpGet?: { path: string; port: string | number };
}

const DIRECTORY = join(REPOSITORY, "deploy/kubernetes");
const files = readdirSync(DIRECTORY).filter((name) => name.endsWith(".yaml"));
const objectsOf = (file: string) =>
  parseAllDocuments(repositoryFile(`deploy/kubernetes/${file}`)).map((document) => document.toJS() as KubeObject);

const dockerfile = readDockerfile();
const runtime = chain(dockerfile, stageNamed(dockerfile, "slim"));
const imagePort = Number(environmentOf(runtime).PORT);
const [imageUid, imageGid] = (lastOf(runtime, "USER") ?? "").split(":").map(Number);
const imageVolume = lastOf(runtime, "VOLUME");

/** The module of kubernetes-models that holds an apiVersion's kinds ("apps/v1" → kubernetes-models/apps/v1). */
async function modelOf(object: KubeObject): Promise<new (data: unknown) => { validate(): void }> {
  const module = (await import(`kubernetes-models/${object.apiVersion}`)) as Record<string, new (data: unknown) => { validate(): void }>;
  const model = module[object.kind];
  if (!model) throw new Error(`kubernetes-models has no ${object.apiVersion} ${object.kind}`);
  return model;
}

function podsOf(
  objects: KubeObject[],
): { object: KubeObject; labels: Record<string, string>; containers: Container[]; volumes: Volume[] }[] {
  return objects
    .filter((object) => object.kind === "Deployment")
    .map((object) => ({
      object,
      labels: object.spec.template.metadata.labels,
      containers: object.spec.template.spec.containers,
      volumes: object.spec.template.spec.volumes ?? [],
    }));
}

const isKeygate = (container: Container) => /\/keygate:/.test(container.image);

/**
 * keygate's configuration in a container, as it would start: the image's environment and the container's (secrets as
 * placeholders), and its mounted file.
 */
function configurationOf(objects: KubeObject[], container: Container, volumes: Volume[], namespace: string | undefined): KeygateConfig {
  const env = {
    ...environmentOf(runtime),
    ...Object.fromEntries(
      (container.env ?? []).map((variable) => [variable.name, variable.value ?? `${variable.name.toLowerCase()}-from-a-secret`]),
    ),
  };
  const files: Record<string, string> = {};
  for (const mount of container.volumeMounts ?? []) {
    const name = volumes.find((candidate) => candidate.name === mount.name)?.configMap?.name;
    if (name === undefined) continue;
    const configMap = objects.find(
      (object) => object.kind === "ConfigMap" && object.metadata.name === name && object.metadata.namespace === namespace,
    );
    for (const [key, text] of Object.entries(configMap?.data ?? {})) files[`${mount.mountPath}/${key}`] = text;
  }
  return configurationIn(env, files);
}

t.test("every object is valid against the Kubernetes API's schema", async (t) => {
  t.same(files.sort(), ["forward-auth.yaml", "sidecar.yaml"]);
  for (const file of files) {
    const objects = objectsOf(file);
    t.ok(objects.length >= 3, `${file}: ${objects.map((object) => object.kind).join(", ")}`);
    for (const object of objects) {
      const Model = await modelOf(object);
      t.doesNotThrow(() => new Model(object).validate(), `${file}: ${object.kind} ${object.metadata.name}`);
    }
  }
});

t.test("the schema check catches a wrong field", async (t) => {
  const [deployment] = objectsOf("sidecar.yaml").filter((object) => object.kind === "Deployment") as [KubeObject];
  const broken = structuredClone(deployment);
  broken.spec.template.spec.containers[1].ports[0].containerPort = "http";
  const Model = await modelOf(broken);
  t.throws(() => new Model(broken).validate(), /containerPort must be integer/);
});

t.test("keygate's containers run as the image's user on a read-only root, with its volume and /tmp writable", async (t) => {
  for (const file of files) {
    const keygates = podsOf(objectsOf(file)).flatMap((pod) => pod.containers.filter(isKeygate).map((container) => ({ pod, container })));
    t.equal(keygates.length, 1, `${file}: one keygate container`);
    for (const { pod, container } of keygates) {
      const context = container.securityContext ?? {};
      t.equal(context.runAsUser, imageUid, "the image's uid");
      t.equal(context.runAsGroup, imageGid, "the image's gid");
      t.equal(context.readOnlyRootFilesystem, true);
      t.equal(context.allowPrivilegeEscalation, false);
      t.same(context.capabilities, { drop: ["ALL"] });
      t.equal(pod.object.spec.template.spec.securityContext.runAsNonRoot, true);
      const writable = (container.volumeMounts ?? []).filter((mount) => !mount.readOnly).map((mount) => mount.mountPath);
      t.same(writable.sort(), [imageVolume, "/tmp"].sort(), `${file}: writable only ${writable.join(", ")}`);
      for (const path of writable) {
        const mount = container.volumeMounts?.find((candidate) => candidate.mountPath === path);
        const volume = pod.volumes.find((candidate) => candidate.name === mount?.name);
        t.ok(volume?.emptyDir, `${path}: an emptyDir`);
      }
    }
  }
});

t.test("probes: startup and liveness on /v2/liveness, readiness on /v2/readiness, at the image's port", async (t) => {
  for (const file of files) {
    for (const pod of podsOf(objectsOf(file))) {
      for (const container of pod.containers.filter(isKeygate)) {
        const port = container.ports?.find((candidate) => candidate.containerPort === imagePort);
        t.ok(port?.name, `${file}: the image's port ${imagePort}, named`);
        const probe = (which: Probe | undefined) => [which?.httpGet?.path, which?.httpGet?.port];
        t.same(probe(container.startupProbe), ["/v2/liveness", port?.name]);
        t.same(probe(container.livenessProbe), ["/v2/liveness", port?.name]);
        t.same(probe(container.readinessProbe), ["/v2/readiness", port?.name]);
        t.ok(pod.object.spec.template.spec.terminationGracePeriodSeconds >= 10, "time to finish the requests in flight");
      }
    }
  }
});

t.test("keygate's environment and mounted configuration are valid, its stores in Redis", async (t) => {
  const variables = documentedVariables();
  for (const file of files) {
    const objects = objectsOf(file);
    for (const pod of podsOf(objects)) {
      for (const container of pod.containers.filter(isKeygate)) {
        for (const variable of container.env ?? []) t.ok(variables.has(variable.name), `${file}: keygate reads ${variable.name}`);
        const config = configurationOf(objects, container, pod.volumes, pod.object.metadata.namespace);
        t.ok(config.storage.redis?.url, `${file}: Redis stores, shared by the replicas`);
        t.not(config.server.workers, "auto", `${file}: workers set (auto counts the node's cores, not the container's)`);
        t.equal(config.analytics.engine, "off", `${file}: the slim image's analytics`);
        t.ok(config.routes.length > 0, `${file}: routes`);
        t.ok(config.rootKeys.length > 0, `${file}: a root key from a secret`);
      }
    }
  }
});

t.test("the sidecar: the Service sends clients to keygate, which forwards to the app in the Pod", async (t) => {
  const objects = objectsOf("sidecar.yaml");
  const [pod] = podsOf(objects);
  const keygate = pod?.containers.find(isKeygate) as Container;
  const app = pod?.containers.find((container) => !isKeygate(container)) as Container;
  const service = objects.find((object) => object.kind === "Service") as KubeObject;
  t.same(service.spec.selector, pod?.labels);
  t.equal(service.spec.ports[0].targetPort, keygate.ports?.[0]?.name, "the Service's port is keygate's");
  const config = configurationOf(objects, keygate, pod?.volumes ?? [], undefined);
  const upstream = new URL(String(config.routes[0]?.upstream));
  t.equal(upstream.hostname, "127.0.0.1", "the app in the same Pod");
  t.same(app.args, ["--port", upstream.port], "the app listens on the route's port");
});

t.test("forward-auth: ingress-nginx asks keygate's door and passes the identity headers on", async (t) => {
  const objects = objectsOf("forward-auth.yaml");
  const ingress = objects.find((object) => object.kind === "Ingress") as KubeObject;
  const annotations = ingress.metadata.annotations ?? {};
  const authUrl = new URL(annotations["nginx.ingress.kubernetes.io/auth-url"] as string);
  const [serviceName, namespace, ...rest] = authUrl.hostname.split(".");
  t.same(rest, ["svc", "cluster", "local"], "a Service's cluster name, reachable from the ingress controller's namespace");
  const service = objects.find(
    (object) => object.kind === "Service" && object.metadata.name === serviceName && object.metadata.namespace === namespace,
  ) as KubeObject;
  t.ok(service, `${authUrl.hostname} is a Service in the example`);
  t.ok(
    service.spec.ports.some((port: { port: number }) => String(port.port) === authUrl.port),
    `port ${authUrl.port} is the Service's`,
  );
  t.equal(authUrl.pathname, FORWARD_AUTH_PATH);

  const pod = podsOf(objects).find((candidate) => JSON.stringify(candidate.labels) === JSON.stringify(service.spec.selector));
  const keygate = pod?.containers.find(isKeygate) as Container;
  t.ok(keygate, "the Service selects keygate's Pods");
  const config = configurationOf(objects, keygate, pod?.volumes ?? [], namespace);
  const path = ingress.spec.rules[0].http.paths[0].path as string;
  const route = config.routes.find((candidate) => path.startsWith(candidate.match.prefix));
  t.ok(route, `a route matches the ingress's path ${path}`);
  const forwarded = Object.values(route?.forward ?? {}).map((header) => String(header).toLowerCase());
  const passed = (annotations["nginx.ingress.kubernetes.io/auth-response-headers"] ?? "").split(",");
  t.ok(passed.length > 0, "auth-response-headers");
  for (const header of passed) t.ok(forwarded.includes(header.toLowerCase()), `${header} is an identity header the route answers with`);
  const backend = ingress.spec.rules[0].http.paths[0].backend.service.name;
  t.ok(
    objects.some(
      (object) => object.kind === "Service" && object.metadata.name === backend && object.metadata.namespace === ingress.metadata.namespace,
    ),
    `the API's Service ${backend} beside the Ingress`,
  );
});
