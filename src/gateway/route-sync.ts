import type { FastifyBaseLogger } from "fastify";
import type { InvalidationBus } from "../cache/invalidation-bus.js";
import type { RouteStore, StoredRouteTable } from "../storage/route-interfaces.js";
import type { RouteRecord } from "../storage/route-records.js";
import type { CurrentGatewaySnapshot } from "./gateway-snapshot.js";
import { compileOpenApiDocument, type OpenApiDocument } from "./openapi-documents.js";

/** How often an instance asks the store for the route table's version, in case it missed an announcement. */
export const ROUTE_VERSION_CHECK_MS = 1_000;

/**
 * Keeps this instance's route table in step with the stored routes: each change is announced on the invalidation
 * bus, and the table's version is checked every `checkMs` as the safety net for an announcement missed. A newer
 * table is read whole and compiled, then swapped in one assignment; reads are serialised, so an older table never
 * replaces a newer one, and one that fails to compile never replaces a working one. The OpenAPI documents of routes
 * with an enabled openapi policy are compiled with the table; a route whose upload is unchanged keeps its document.
 */
export class RouteSync {
  private readonly options: { snapshot: CurrentGatewaySnapshot; store: RouteStore; log: FastifyBaseLogger; checkMs: number };
  private timer: NodeJS.Timeout | undefined;
  /** Reads run one after another; `queued` is the one that has not started yet (later asks share it). */
  private tail: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;
  /** The upload (route id → uploadedAt) of each document that failed to compile: not compiled, nor logged, again. */
  private readonly failedDocuments = new Map<string, number>();

  constructor(options: { snapshot: CurrentGatewaySnapshot; store: RouteStore; log: FastifyBaseLogger; checkMs?: number }) {
    const checkMs = options.checkMs ?? ROUTE_VERSION_CHECK_MS;
    this.options = { snapshot: options.snapshot, store: options.store, log: options.log, checkMs };
  }

  /** Reads the stored routes now, then checks their version every `checkMs` until stopped. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.check(), this.options.checkMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** A change announced (`version`; undefined: messages may have been missed): reads the table when it is newer. */
  announced(version?: number): void {
    if (version !== undefined && version <= this.options.snapshot.current.stored.version) return;
    void this.refresh();
  }

  /** Resolves once a read of the table that started after this call is in force. */
  refresh(): Promise<void> {
    if (this.queued) return this.queued;
    const read = this.tail.then(() => {
      this.queued = undefined;
      return this.read();
    });
    this.queued = read;
    this.tail = read;
    return read;
  }

  private async check(): Promise<void> {
    try {
      if ((await this.options.store.version()) > this.options.snapshot.current.stored.version) await this.refresh();
    } catch (error) {
      this.options.log.warn({ err: error }, "cannot check the stored routes' version; the routes in force stay as they are");
    }
  }

  private async read(): Promise<void> {
    const { snapshot, store, log } = this.options;
    try {
      const table = await store.table();
      if (table.version <= snapshot.current.stored.version) return;
      if (!snapshot.applyStored(table, await this.documents(table))) return;
      for (const { route, problems } of snapshot.current.table.skipped) {
        log.error({ route: route.name, problems }, "a stored route clashes with the configuration's routes and is left out");
      }
      log.info({ version: table.version, routes: table.routes.length }, "stored routes taken up");
    } catch (error) {
      log.error({ err: error }, "cannot read or compile the stored routes; the routes in force stay as they are");
    }
  }

  /**
   * The compiled OpenAPI documents of the table's routes that have one and an enabled openapi policy: the snapshot's
   * own while the upload is the same, else read and compiled. One that does not compile leaves its route without
   * validation (it was checked when uploaded), and is logged.
   */
  private async documents(table: StoredRouteTable): Promise<ReadonlyMap<string, OpenApiDocument>> {
    const { snapshot, store, log } = this.options;
    const documents = new Map<string, OpenApiDocument>();
    for (const route of table.routes) {
      const uploadedAt = route.openApi?.uploadedAt;
      if (uploadedAt === undefined || !validatesRequests(route)) continue;
      const kept = snapshot.current.openApi.get(route.id);
      if (kept?.uploadedAt === uploadedAt) {
        documents.set(route.id, kept);
        continue;
      }
      if (this.failedDocuments.get(route.id) === uploadedAt) continue;
      const text = await store.openApi(route.id);
      // Removed since the table was read: the next version says so.
      if (text === null) continue;
      try {
        documents.set(route.id, await compileOpenApiDocument(text, uploadedAt));
        this.failedDocuments.delete(route.id);
      } catch (error) {
        this.failedDocuments.set(route.id, uploadedAt);
        log.error(
          { err: error, route: route.name },
          "the route's OpenAPI document does not compile; its openapi policies validate nothing",
        );
      }
    }
    return documents;
  }
}

/** Whether a route has an enabled openapi policy. */
function validatesRequests(route: RouteRecord): boolean {
  return route.policies.some((policy) => policy.enabled && policy.openapi !== undefined);
}

/**
 * A RouteSync that takes up every change announced on `invalidations` (after a gap in its messages, the table is read
 * again) besides its version checks: a server's, and the Fastify plugin's for the stored routes its routes follow.
 */
export function routeSyncFollowing(
  snapshot: CurrentGatewaySnapshot,
  store: RouteStore,
  invalidations: Pick<InvalidationBus, "listen">,
  log: FastifyBaseLogger,
): RouteSync {
  const sync = new RouteSync({ snapshot, store, log });
  invalidations.listen((message) => {
    if (message.kind === "routes") sync.announced(message.version);
    else if (message.kind === "everything") sync.announced();
  });
  return sync;
}
