import type { FastifyBaseLogger } from "fastify";
import type { RouteStore } from "../storage/interfaces.js";
import type { CurrentGatewaySnapshot } from "./gateway-snapshot.js";

/** How often an instance asks the store for the route table's version, in case it missed an announcement. */
export const ROUTE_VERSION_CHECK_MS = 1_000;

/**
 * Keeps this instance's route table in step with the stored routes: each change is announced on the invalidation
 * bus, and the table's version is checked every `checkMs` as the safety net for an announcement missed. A newer
 * table is read whole and compiled, then swapped in one assignment; reads are serialised, so an older table never
 * replaces a newer one, and one that fails to compile never replaces a working one.
 */
export class RouteSync {
  private readonly options: { snapshot: CurrentGatewaySnapshot; store: RouteStore; log: FastifyBaseLogger; checkMs: number };
  private timer: NodeJS.Timeout | undefined;
  /** Reads run one after another; `queued` is the one that has not started yet (later asks share it). */
  private tail: Promise<void> = Promise.resolve();
  private queued: Promise<void> | undefined;

  constructor(options: { snapshot: CurrentGatewaySnapshot; store: RouteStore; log: FastifyBaseLogger; checkMs?: number }) {
    this.options = { ...options, checkMs: options.checkMs ?? ROUTE_VERSION_CHECK_MS };
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
      if (!snapshot.applyStored(table)) return;
      for (const { route, problems } of snapshot.current.table.skipped) {
        log.error({ route: route.name, problems }, "a stored route clashes with the configuration's routes and is left out");
      }
      log.info({ version: table.version, routes: table.routes.length }, "stored routes taken up");
    } catch (error) {
      log.error({ err: error }, "cannot read or compile the stored routes; the routes in force stay as they are");
    }
  }
}
