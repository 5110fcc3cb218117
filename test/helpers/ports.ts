import { createServer, type Server } from "node:net";

export const LOOPBACK = "127.0.0.1";

/** A listener on `port` of the loopback address, or undefined when the port is taken. */
function listen(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, LOOPBACK, () => resolve(server));
  });
}

/**
 * `count` distinct loopback ports that were free a moment ago (the OS picked them for listeners that are closed
 * again); with `busOffset`, port + busOffset was free too (Redis Cluster listens on port + 10000 for its bus). All
 * are held until every one is found, so none repeats.
 */
export async function freePorts(count: number, busOffset = 0): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  try {
    for (let attempt = 0; ports.length < count; attempt++) {
      if (attempt > count * 50)
        throw new Error(`could not find ${count} free ports${busOffset ? ` with free bus ports (+${busOffset})` : ""}`);
      const server = await listen(0);
      if (!server) continue;
      held.push(server);
      const port = (server.address() as { port: number }).port;
      if (busOffset === 0) {
        ports.push(port);
        continue;
      }
      if (port + busOffset > 65_535) continue;
      const bus = await listen(port + busOffset);
      if (!bus) continue;
      held.push(bus);
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** A loopback port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port as number;
}
